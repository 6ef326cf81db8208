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
    def __init__(self, strategy: Strategy, stream_keys, sigma, alpha, total: int, moves_weights: bool = True):
        """sigma, alpha: schedules (schedule, start, end, warmup: a config's es.sigma / es.alpha) over
        `total` updates; stream_keys: the perturber's (seed -> its noise streams' keys), so no two
        members of a generation share a stream. moves_weights=False (a search over contexts alone):
        members carry no noise (seed 0), sigma and alpha are 0 and the update applies nothing."""
        self.strategy, self.stream_keys, self.sigma, self.alpha, self.total = strategy, stream_keys, sigma, alpha, total
        self.moves_weights = moves_weights

    def values(self, t: int) -> tuple[float, float]:
        """sigma and alpha of generation t."""
        if not self.moves_weights:
            return 0.0, 0.0
        s, a = self.sigma, self.alpha
        return (scheduled(s.schedule, s.start, s.end, t, self.total, s.warmup),
                scheduled(a.schedule, a.start, a.end, t, self.total, a.warmup))

    def ask(self, t: int) -> list[Member]:
        if not self.moves_weights:
            return [Member(k, 0, +1) for k in range(self.strategy.population)]
        return self.strategy.ask(t, self.stream_keys)

    def tell(self, t: int, members: list[Member], rewards: list[float], update: Update) -> dict:
        """Shape the rewards, make the update and return generation t's history record."""
        told = self.strategy.tell(members, rewards)
        sigma, alpha = self.values(t)
        seeds, signs, coefficients = [m.seed for m in members], [m.sign for m in members], told.coefficients
        if not self.moves_weights:  # nothing for replay to apply: no seeds, no coefficients
            seeds, signs, coefficients = [], [], np.zeros(0)
        digest = update(seeds, coefficients, alpha, len(members))
        return {"generation": t, "sigma": sigma, "alpha": alpha, "population": len(members), "seeds": seeds,
                "signs": signs, "rewards": [r if math.isfinite(r) else None for r in rewards],
                "shaped": told.shaped, "coefficients": coefficients.tolist(),
                "nonfinite_rewards": told.nonfinite, "weights_hash": digest}
