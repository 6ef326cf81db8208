"""Sigma and alpha schedules: value at generation t of T."""
from __future__ import annotations

import math

SCHEDULES = ("cosine", "linear", "constant")


def scheduled(kind: str, start: float, end: float, t: int, total: int, warmup: int = 0) -> float:
    """Value of a schedule going from `start` (t=0) to `end` (t=total).

    cosine: end + (start - end) * (1 + cos(pi * t / T)) / 2   (the paper's sigma decay)
    linear: start + (end - start) * t / T
    constant: start
    warmup: the first `warmup` generations ramp linearly from 0 up to the schedule.
    """
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule {kind!r}; allowed: {', '.join(SCHEDULES)}")
    if total <= 0:
        raise ValueError(f"schedule length must be positive, got {total}")
    frac = min(max(t / total, 0.0), 1.0)
    if kind == "constant":
        value = start
    elif kind == "linear":
        value = start + (end - start) * frac
    else:
        value = end + (start - end) * (1.0 + math.cos(math.pi * frac)) / 2.0
    if warmup > 0 and t < warmup:
        value *= (t + 1) / (warmup + 1)
    return float(value)
