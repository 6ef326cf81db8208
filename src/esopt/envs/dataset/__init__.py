"""env.id=dataset: prompts from a file or a ``datasets`` dataset, scored by a reward function
(TRL's prompts and reward_funcs, as a text environment). spec.py: the options and the spec; rows.py:
reading the source; tasks.py: splits and the task source; env.py: one row's episode; reward.py:
calling the reward function; rewards.py: ready-made reward functions. docs/datasets.md."""
