"""Prompt-only baselines from the field, run on esopt's own tasks, episodes and held-out split.

`esopt baseline gepa` (baseline.py) runs GEPA (the `gepa` package, extra `prompt-opt`) on the
agent's context components with the task model itself as both task and reflection LM: the
context-only arm's external comparison (docs/adapt.md "Prompt-optimiser baseline: GEPA").
Nothing here imports gepa at import time.
"""
