"""What `esopt train --resume RUN key=value ...` may change, checked before anything is written.

The record of a run (ES: its history; GRPO: its checkpoint) was made under the run's config:
settings that change what it means, or how it replays, cannot change on resume (the algorithm's
`frozen` keys). Settings of the updates still to come (more of them, sigma/alpha schedules,
evaluation, batch sizes) can.
"""
from __future__ import annotations

from ..es.history import RunFolderError
from .algorithm import algorithm


def get_key(cfg, dotted: str):
    node = cfg
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def done_so_far(run, cfg) -> int:
    """Updates made in `run` (whose own config is `cfg`), as its algorithm counts them."""
    return algorithm(cfg.algo).done(run, cfg)


def check_resume(run, new, algo=None) -> None:
    """Refuse (one line) overrides that change the meaning of the run's record, and budgets
    below what is already done."""
    old = run.load_config()
    algo = algo or algorithm(old.algo)
    for key in algo.frozen:
        if get_key(old, key) != get_key(new, key):
            raise RunFolderError(f"{key} cannot change on resume ({get_key(old, key)!r} in {run.path}, "
                                 f"{get_key(new, key)!r} given): the {algo.record} was made with it; start a new run "
                                 "for other settings")
    done = algo.done(run, old)
    key = algo.budget_key
    if get_key(new, key) < done:
        raise RunFolderError(f"{key}={get_key(new, key)} is fewer than the {done} already done in {run.path}; to "
                             f"evaluate earlier weights use `esopt eval --run` on a copy, or keep {key} >= {done}")
