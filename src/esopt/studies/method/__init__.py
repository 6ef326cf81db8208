"""Method studies: does the method learn, and how well against the alternatives: ES vs GRPO at
equal episodes or seconds, one algorithm's settings side by side, the horizon, the population
and backbone, which tasks leave a small model room to learn.

The rule: a study lives here when its answer is the reward of training runs compared across
algorithms, settings or tasks (validation to choose, held-out to report); the runs are launched
through studies/runs.py. What a run costs on this hardware, or whether two ways of computing it
agree, is studies/machine/. The `esopt bench` rows of these modules: method/benches.py."""
