"""Deterministic seed derivation without touching any global RNG."""

from __future__ import annotations

import hashlib


def derive_seed(*parts: object) -> int:
    """Return a stable non-negative 63-bit seed derived from ``parts``.

    The seed depends only on ``repr(parts)``, so it is identical across runs,
    processes and machines (unlike ``hash()``). Use it to seed local
    ``random.Random`` or ``numpy.random.default_rng`` instances, e.g.
    ``random.Random(derive_seed("sudoku", size, seed, attempt))``.
    """
    digest = hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1
