"""Figures of code-tool episodes from their records (``esopt eval --out``, or a run's
trajectories/eval_genNNNN.jsonl): success, the share of episodes with a valid tool call (a python call
that ran without error), and base -> after paired by task.

    python -m esopt.envs.codetool.records BASE.jsonl [AFTER.jsonl]
"""
from __future__ import annotations

import json
import sys

from ...utils.stats import mean_se
from .tool import failed


def read(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def valid_call(episode: dict) -> bool:
    """Whether any turn of the episode ran a python call without error."""
    return any("result" in c and not failed(str(c["result"]))
               for t in episode.get("turns", []) for c in (t.get("tool_calls") or []))


def figures(episodes: list[dict]) -> dict:
    solved = [float(bool(e.get("solved"))) for e in episodes]
    calls = [float(valid_call(e)) for e in episodes]
    (s, s_se), (c, c_se) = mean_se(solved), mean_se(calls)
    return {"n": len(episodes), "success": s, "success_se": s_se, "valid_tool_call": c, "valid_tool_call_se": c_se,
            "reward": sum(e.get("reward", 0.0) for e in episodes) / len(episodes)}


def paired(base: list[dict], after: list[dict]) -> dict:
    """after - base reward, paired by task (tasks in both; a task's repeats averaged), with its SE."""
    def by_task(eps):
        out: dict[str, list[float]] = {}
        for k, e in enumerate(eps):
            out.setdefault(str(e.get("task", k)), []).append(float(e.get("reward", 0.0)))
        return {t: sum(v) / len(v) for t, v in out.items()}

    b, a = by_task(base), by_task(after)
    common = [t for t in b if t in a]
    if not common:
        raise ValueError("the two record files share no task")
    d, se = mean_se([a[t] - b[t] for t in common])
    return {"tasks": len(common), "base": sum(b[t] for t in common) / len(common),
            "after": sum(a[t] for t in common) / len(common), "diff": d, "diff_se": se}


def main(argv: list[str]) -> None:
    if not 1 <= len(argv) <= 2:
        raise SystemExit("usage: python -m esopt.envs.codetool.records BASE.jsonl [AFTER.jsonl]")
    try:
        runs = [read(p) for p in argv]
        out = [{"file": path, **figures(eps)} for path, eps in zip(argv, runs)]
        if len(runs) == 2:
            out.append({"paired": paired(*runs)})
    except (OSError, ValueError, ZeroDivisionError) as err:  # a missing, empty or unrelated file: one line
        raise SystemExit(f"esopt.envs.codetool.records: {type(err).__name__}: {err}") from None
    for row in out:
        print(json.dumps(row))


if __name__ == "__main__":
    main(sys.argv[1:])
