"""reasoning-gym's procedural tasks (PyPI ``reasoning-gym``) as one-question episodes: the env
(env.py), reasoning-gym's datasets, configs and curriculum levels (build.py), the task splits
(tasks.py) and the spec for the harness (spec.py: env.id=reasoning-gym). docs/reasoning-gym.md."""
