"""Sigma and alpha schedules: the value used by generation t of a run of T generations."""
from __future__ import annotations

import math

SCHEDULES = ("cosine", "linear", "constant")


def scheduled(kind: str, start: float, end: float, t: int, total: int, warmup: int = 0) -> float:
    """Value for generation `t` (0-based) of a run of `total` generations.

    The first generation (t = 0) uses `start` and the last one (t = total - 1)
    uses `end`: with u = t / (total - 1) (u = 0 for a one-generation run),
    cosine: end + (start - end) * (1 + cos(pi * u)) / 2   (the paper's sigma decay,
            its t / T with T the index of the last generation)
    linear: start + (end - start) * u
    constant: start
    warmup W: generations t < W get the value times (t + 1) / (W + 1), a linear ramp
    from 1/(W+1) of it; never 0, since a generation at sigma 0 (identical members) or
    alpha 0 would be wasted. From t = W on, the schedule itself.
    """
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule {kind!r}; allowed: {', '.join(SCHEDULES)}")
    if total <= 0:
        raise ValueError(f"schedule length must be positive, got {total}")
    u = min(max(t / (total - 1), 0.0), 1.0) if total > 1 else 0.0
    if kind == "constant":
        value = start
    elif kind == "linear":
        value = start + (end - start) * u
    else:
        value = end + (start - end) * (1.0 + math.cos(math.pi * u)) / 2.0
    if warmup > 0 and t < warmup:
        value *= (t + 1) / (warmup + 1)
    return float(value)
