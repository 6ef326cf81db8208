"""Final held-out tasks that no earlier choice saw (bench compare --unseen-by-seeds): a study's choices read the
held-out and validation tasks of its earlier runs; where the task space is small (4x4 Sudoku), a fresh held-out set
(tasks.heldout_skip) can still hold some of them, so the finals are also given on the rest. Tasks are compared by
content (the first observation), not by id: ids of some sources name the seed that drew them."""
from __future__ import annotations

import json


def _content(obs) -> str:
    return json.dumps(obs, sort_keys=True, default=str)


def split_contents(cfg, seed: int, split: str) -> dict[str, str]:
    """{task id: content} of a split ("heldout" or "validation") of the runs at `seed` under `cfg`."""
    from ...envs.spec import resolve

    source = resolve(cfg.env.id).task_source(cfg.env, cfg.tasks, seed)
    envs, ids, obs = getattr(source, split)()
    for env in envs:
        close = getattr(env, "close", None)
        if close is not None:
            close()
    return {str(i): _content(o) for i, o in zip(ids, obs)}


def seen_contents(cfg, seeds: list[int]) -> set[str]:
    """The contents of every held-out and validation task the runs at `seeds` play under `cfg` (validation only
    where cfg has a validation split)."""
    seen: set[str] = set()
    for seed in seeds:
        seen |= set(split_contents(cfg, seed, "heldout").values())
        if cfg.tasks.validation:
            seen |= set(split_contents(cfg, seed, "validation").values())
    return seen


def unseen_ids(final_cfg, seed: int, seen: set[str]) -> set[str]:
    """Ids of the held-out tasks of the final run at `seed` (under final_cfg) whose content is not in `seen`."""
    return {i for i, c in split_contents(final_cfg, seed, "heldout").items() if c not in seen}
