"""Final runs' held-out figures task by task, and the tasks no earlier choice saw (bench compare and bench settings
--unseen-by-seeds): a study's choices read the held-out and validation tasks of its earlier runs; where the task space
is small (4x4 Sudoku), a fresh held-out set (tasks.heldout_skip) can still hold some of them, so the finals are also
given on the rest. Tasks are compared by content (the first observation), not by id: ids of some sources name the
seed that drew them."""
from __future__ import annotations

import json
import math
from statistics import mean


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


def unseen_keep(config: str, seen_overrides: list[str], final_overrides: list[str], seeds: list[int],
                seen_by_seeds: list[int]) -> list[set[str]]:
    """Per final seed, the ids of its held-out tasks (under final_overrides) that none of the held-out and
    validation sets of runs at `seen_by_seeds` (under seen_overrides, the tuning settings) holds."""
    from ...config import load_config

    seen = seen_contents(load_config(config, seen_overrides), seen_by_seeds)
    final_cfg = load_config(config, final_overrides)
    return [unseen_ids(final_cfg, seed, seen) for seed in seeds]


def paired_by_task(a_runs: list[dict], b_runs: list[dict], keep: list[set[str]] | None = None) -> dict | None:
    """A - B (two methods or settings) on the final held-out tasks, seed by seed (the same tasks at a seed):
    per seed the mean and SE over tasks of the task-by-task difference; over seeds their mean with the
    SE over seeds (spread of the seed means) and the SE over tasks (the per-seed SEs pooled). With `keep`
    (one set of task ids per seed), only those tasks count. None where a run has no per-task figures."""
    from ...utils.stats import mean_se

    per_seed = []
    for k, (x, y) in enumerate(zip(a_runs, b_runs)):
        a, b = ((r.get("heldout_by_task") or {}).get("final") for r in (x, y))
        if not a or not b or set(a) != set(b):
            return None
        tasks = [t for t in a if keep is None or t in keep[k]]
        if not tasks:
            return None
        per_seed.append(mean_se([a[t] - b[t] for t in tasks]))
    n = len(per_seed)
    overall, se_seeds = mean_se([m for m, _ in per_seed])
    return {"per_seed": [{"mean": m, "se_over_tasks": se} for m, se in per_seed], "mean": overall,
            "se_over_seeds": se_seeds if n > 1 else None,
            "se_over_tasks": math.sqrt(sum(se ** 2 for _, se in per_seed)) / n}


def paired_note(p: dict) -> str:
    """paired_by_task's figures as the console writes them: "+0.0510 (SE over seeds 0.2082, SE over tasks 0.0278)"."""
    se_seeds = f"{p['se_over_seeds']:.4f}" if p["se_over_seeds"] is not None else "n/a"
    return f"{p['mean']:+.4f} (SE over seeds {se_seeds}, SE over tasks {p['se_over_tasks']:.4f})"


def subset_row(runs: list[dict], keep: list[set[str]]) -> dict | None:
    """One method's (or setting's) held-out reward before and after training on a subset of each seed's tasks
    (`keep`, one set per seed), from the runs' per-task figures; None where a run lacks them."""
    bases, finals = [], []
    for r, ids in zip(runs, keep):
        by = r.get("heldout_by_task") or {}
        if not by.get("base") or not by.get("final") or not ids <= set(by["final"]) or not ids <= set(by["base"]):
            return None
        bases.append(mean(by["base"][t] for t in ids))
        finals.append(mean(by["final"][t] for t in ids))
    return {"tasks_per_seed": [len(ids) for ids in keep], "bases": bases, "finals": finals,
            "base_mean": mean(bases), "final_mean": mean(finals),
            "improvements": [f - b for b, f in zip(bases, finals)]}
