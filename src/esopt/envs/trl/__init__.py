"""TRL environment classes, unchanged: a class written for TRL's GRPOTrainer(environment_factory=...) (built
with no arguments, ``reset(**row)``, its public methods the agent's tools, rewarded by TRL-style reward
functions and/or its ``get_reward()``), trained and evaluated over a dataset's rows. methods.py: the class's
tools; rewards.py: calling the reward functions; env.py: one row's episode (a TextEnv); spec.py: the
options, the task source and the preflight. esopt does not need TRL for any of it. docs/envs.md."""
