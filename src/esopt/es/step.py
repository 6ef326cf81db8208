"""One ES step: schedules -> ask -> (members played elsewhere) -> tell -> update -> history record.

The ES trainer (whose runner plays the members here or on Ray workers) and the heuristic
search's weight steps (ahd/weights.py) take every generation through ESStep. What `tell`
returns is the record the history keeps: a generation's bookkeeping is written in one place.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .schedules import scheduled
from .strategy import Member, Strategy

# update(seeds, signed coefficients, alpha, population) -> the weights hash after it, wherever the weights are
Update = Callable[[list[int], np.ndarray, float, int], str]


class ESStep:
    def __init__(self, strategy: Strategy, stream_keys, sigma, alpha, total: int):
        """sigma, alpha: schedules (schedule, start, end, warmup: a config's es.sigma / es.alpha) over
        `total` updates; stream_keys: the perturber's (seed -> its noise streams' keys), so no two
        members of a generation share a stream."""
        self.strategy, self.stream_keys, self.sigma, self.alpha, self.total = strategy, stream_keys, sigma, alpha, total

    def values(self, t: int) -> tuple[float, float]:
        """sigma and alpha of generation t."""
        s, a = self.sigma, self.alpha
        return (scheduled(s.schedule, s.start, s.end, t, self.total, s.warmup),
                scheduled(a.schedule, a.start, a.end, t, self.total, a.warmup))

    def ask(self, t: int) -> list[Member]:
        return self.strategy.ask(t, self.stream_keys)

    def tell(self, t: int, members: list[Member], rewards: list[float], update: Update,
             sigma: float | None = None, alpha: float | None = None) -> dict:
        """Shape the rewards, make the update and return generation t's history record. sigma and
        alpha default to the schedules' (a generation that moved no weights passes 0)."""
        told = self.strategy.tell(members, rewards)
        scheduled_sigma, scheduled_alpha = self.values(t)
        sigma = scheduled_sigma if sigma is None else sigma
        alpha = scheduled_alpha if alpha is None else alpha
        seeds = [m.seed for m in members]
        digest = update(seeds, told.coefficients, alpha, len(members))
        return {"generation": t, "sigma": sigma, "alpha": alpha, "population": len(members), "seeds": seeds,
                "signs": [m.sign for m in members], "rewards": [r if math.isfinite(r) else None for r in rewards],
                "shaped": told.shaped, "coefficients": told.coefficients.tolist(),
                "nonfinite_rewards": told.nonfinite, "weights_hash": digest}
