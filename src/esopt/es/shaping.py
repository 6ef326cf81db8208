"""Reward shaping across the population: one signature, reward is maximised.

Every method returns zeros when all (finite) rewards are equal, so an
uninformative generation never moves the weights.

Non-finite rewards (NaN/inf from a failed member) never reach the weights:
they are replaced by the lowest finite reward of the population before
shaping (the member counts as the worst), and if no reward is finite all
coefficients are zero.
"""
from __future__ import annotations

import numpy as np

SHAPINGS = ("zscore", "centered_rank", "none")


def sanitize(rewards) -> tuple[np.ndarray, int]:
    """Replace non-finite rewards with the worst finite one; returns (rewards, n_replaced)."""
    r = np.asarray(rewards, dtype=np.float64).copy()
    bad = ~np.isfinite(r)
    if bad.all():
        return np.zeros_like(r), int(bad.sum())
    if bad.any():
        r[bad] = r[~bad].min()
    return r, int(bad.sum())


def zscore(r: np.ndarray) -> np.ndarray:
    r = _unit(r)  # the z-score does not depend on the scale: huge finite rewards cannot overflow its squares
    std = r.std()
    if std < 1e-12 * max(1.0, abs(r).max()):
        return np.zeros_like(r)
    return (r - r.mean()) / std


HUGE = 1e100  # rewards above it are scaled before shaping (their squares or sums would overflow a float64)


def _unit(r: np.ndarray) -> np.ndarray:
    """r divided by its largest magnitude when that is above HUGE (else r as is: the same figures, bit for bit,
    as before this guard)."""
    top = np.abs(r).max() if r.size else 0.0
    return r / top if top > HUGE else r


def centered_rank(r: np.ndarray) -> np.ndarray:
    """Ranks mapped to [-0.5, 0.5]; ties share their average rank."""
    n = len(r)
    if n < 2:
        return np.zeros_like(r)
    order = np.argsort(r, kind="stable")
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.arange(n, dtype=np.float64)
    for value in np.unique(r):
        tie = r == value
        ranks[tie] = ranks[tie].mean()
    return ranks / (n - 1) - 0.5


def none(r: np.ndarray) -> np.ndarray:
    """Raw rewards, only centred on the population mean (computed without overflow)."""
    top = np.abs(r).max() if r.size else 0.0
    return r - (_unit(r).mean() * top if top > HUGE else r.mean())


def shape(rewards, method: str = "zscore") -> np.ndarray:
    if method not in SHAPINGS:
        raise ValueError(f"unknown shaping {method!r}; allowed: {', '.join(SHAPINGS)}")
    r, _ = sanitize(rewards)
    return {"zscore": zscore, "centered_rank": centered_rank, "none": none}[method](r)
