"""The logit update: a score-function (REINFORCE / NES-style) step on the same shaped rewards
the weights get.

    logits += lr * mean_u f_u * grad log p(draw_u)      then clipped to [-clip, clip]

over the generation's distinct draws u (a draw shared by an antithetic pair counts once, with
f_u the mean shaped reward of the members that played it). grad log p is x - p for a skill
(x = 1 if included) and onehot - softmax for a slot. Shaped rewards are centred across the
population, so their mean is the baseline; an all-equal generation leaves the logits unchanged.
Pure float64 arithmetic on recorded values: replaying it gives the same bits.
"""
from __future__ import annotations

import numpy as np

from .genome import Draw, Genome


def context_step(genome: Genome, draws: list[Draw], units: list[int], shaped: list[float], lr: float,
                 clip: float) -> Genome:
    if not len(draws) == len(units) == len(shaped):
        raise ValueError(f"context update got {len(draws)} draws, {len(units)} units and {len(shaped)} rewards")
    groups: dict[int, tuple[Draw, list[float]]] = {}
    for d, u, f in zip(draws, units, shaped):
        draw, rewards = groups.setdefault(u, (d, []))
        if draw != d:
            raise ValueError(f"members of draw unit {u} played different contexts")
        rewards.append(float(f))
    if not groups:
        return genome
    grad = np.mean([np.mean(fs) * genome.grad_log_prob(d) for d, fs in groups.values()], axis=0)
    return Genome(genome.lib, np.clip(genome.logits + lr * grad, -clip, clip))
