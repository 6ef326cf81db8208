"""The ES optimizer: noise, perturbation, schedules, shaping, strategy, history. Imports torch only."""
