"""Score a candidate heuristic: run it in the sandbox, then compute the problem's objective in this
(the parent) process from the raw outputs. The candidate never reports its own score."""
from __future__ import annotations

import math
from dataclasses import dataclass

from esopt.sandbox.parent import Limits, run_candidate


@dataclass
class Evaluation:
    valid: bool
    objective: float | None  # mean over instances; lower is better
    per_instance: list[float] | None
    reason: str | None  # why it is invalid (None when valid)
    wall_s: float


def evaluate(problem, code: str, instances: list[dict], limits: Limits = Limits()) -> Evaluation:
    """`problem` needs entry, driver and objective(instance, output) (a Problem from esopt.ahd.problems).
    Sandbox failures and outputs the objective rejects (InvalidOutput, or any error it raises) make the
    evaluation invalid with the reason; SandboxUnavailable propagates (nothing was run)."""
    if not instances:
        raise ValueError("evaluate needs at least one instance")
    outcome = run_candidate(code, problem.entry, problem.driver, instances, limits)
    if not outcome.ok:
        return Evaluation(False, None, None, outcome.reason, outcome.wall_s)
    per_instance = []
    for i, (instance, output) in enumerate(zip(instances, outcome.outputs)):
        try:
            value = float(problem.objective(instance, output))
        except ValueError as e:  # InvalidOutput is a ValueError
            return _invalid(f"invalid output: {_short(e)} (instance {i})", outcome.wall_s)
        except Exception as e:  # the objective choked on something it did not expect: still the output's fault
            return _invalid(f"invalid output: {type(e).__name__}: {_short(e)} (instance {i})", outcome.wall_s)
        if not math.isfinite(value):
            return _invalid(f"invalid output: objective is {value} (instance {i})", outcome.wall_s)
        per_instance.append(value)
    return Evaluation(True, sum(per_instance) / len(per_instance), per_instance, None, outcome.wall_s)


def _invalid(reason: str, wall_s: float) -> Evaluation:
    return Evaluation(False, None, None, reason, wall_s)


def _short(e: BaseException, n: int = 200) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= n else text[: n - 3] + "..."
