"""ask / tell over seeds. Knows nothing of models."""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .shaping import sanitize, shape


@dataclass(frozen=True)
class Member:
    index: int
    seed: int
    sign: int  # +1, or -1 for the mirrored half of an antithetic pair


def member_seed(run_seed: int, generation: int, k: int, attempt: int = 0) -> int:
    text = f"member/{int(run_seed)}/{generation}/{k}" + (f"/redraw{attempt}" if attempt else "")
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


MAX_REDRAWS = 1000


class Strategy:
    """Population sampling and reward-to-coefficient mapping for one run."""

    def __init__(self, population: int, seed: int, antithetic: bool = True, shaping: str = "zscore"):
        if population < 2:
            raise ValueError(f"es.population must be >= 2, got {population}")
        if antithetic and population % 2:
            raise ValueError(f"es.population must be even with es.antithetic=true, got {population}")
        self.population = population
        self.seed = seed
        self.antithetic = antithetic
        self.shaping = shaping
        shape([0.0, 1.0], shaping)  # validates the name early

    def ask(self, generation: int, stream_keys: Callable[[int], list[int]] | None = None) -> list[Member]:
        """The generation's members. With `stream_keys` (seed -> the generator keys of that member's
        noise streams, Perturber.stream_keys), a seed whose keys repeat a key of its own or of an
        earlier member of this generation is redrawn (deterministically, from the same hash with a
        redraw counter), so no two noise streams of one generation coincide. The seeds are recorded
        in the history, so replay needs no redraw."""
        used: set[int] = set()

        def seed_for(k: int) -> int:
            for attempt in range(MAX_REDRAWS):
                s = member_seed(self.seed, generation, k, attempt)
                if stream_keys is None:
                    return s
                keys = stream_keys(s)
                if len(set(keys)) == len(keys) and not used.intersection(keys):
                    used.update(keys)
                    return s
            raise RuntimeError(f"no member seed with distinct noise streams after {MAX_REDRAWS} draws "
                               f"(generation {generation}, member {k}): the stream key space is too small")

        members = []
        if self.antithetic:
            for k in range(self.population // 2):
                s = seed_for(k)
                members.append(Member(2 * k, s, +1))
                members.append(Member(2 * k + 1, s, -1))
        else:
            for k in range(self.population):
                members.append(Member(k, seed_for(k), +1))
        return members

    def tell(self, members: list[Member], rewards) -> "Told":
        """The shaped rewards, each member's update coefficient (its shaped reward times its sign)
        and how many rewards were non-finite."""
        if len(rewards) != len(members):
            raise ValueError(f"got {len(rewards)} rewards for {len(members)} members")
        _, n_bad = sanitize(rewards)
        weights = shape(rewards, self.shaping)
        coefs = np.array([w * m.sign for w, m in zip(weights, members)], dtype=np.float64)
        return Told([float(w) for w in weights], coefs, n_bad)


@dataclass(frozen=True)
class Told:
    shaped: list[float]  # per member, as shaping gave them
    coefficients: np.ndarray  # per member: shaped x sign (what the update multiplies each member's noise by)
    nonfinite: int  # rewards that were NaN or infinite (shaped as the worst)
