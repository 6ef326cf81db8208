"""The numba bodies of es/kernels.py (imported on first use only: numba costs ~60 MB of RSS).

At module level, not in a closure: numba's cache key of a function that calls closure-bound
dispatchers changed in every process, so the cache gained an entry per run and never hit
(tests/es/test_kernels_cache.py)."""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

BLOCK = 1 << 16  # elements per parallel block; lost indices of a block stay in order

# Serial inner loops over one block's slices: simple enough for LLVM to vectorise
# (indexing into the whole array from inside prange was not, and ran 3x slower).
@njit(cache=True)
def mark(w, eps, s, lost):
    # lost = the bits of (o + d) - d differ from o's: a float != alone would miss
    # -0.0 coming back as +0.0, the one pair of equal floats with different bits
    for i in range(w.size):
        o = w[i]
        d = s * eps[i]
        b = (o + d) - d
        lost[i] = (b != o) | ((o == 0.0) & (math.copysign(1.0, b) != math.copysign(1.0, o)))


@njit(cache=True)
def collect(lost, w, idx, val, base):
    c = 0
    for i in range(lost.size):
        if lost[i]:
            idx[c] = base + i
            val[c] = w[i]
            c += 1
    return c


@njit(cache=True)
def add(w, eps, s):
    for i in range(w.size):
        w[i] = w[i] + s * eps[i]


@njit(cache=True)
def sub(w, eps, s):
    for i in range(w.size):
        w[i] = w[i] - s * eps[i]


@njit(parallel=True, cache=True)
def perturb(w, eps, s, idx, val, lost):
    # per block (256 KB of w, in cache for the second and third pass): find the
    # lost elements, keep their original values, then add
    n = w.size
    nb = (n + BLOCK - 1) // BLOCK
    counts = np.zeros(nb, np.int64)
    for b in prange(nb):
        lo = b * BLOCK
        hi = min(lo + BLOCK, n)
        mark(w[lo:hi], eps[lo:hi], s, lost[lo:hi])
        counts[b] = collect(lost[lo:hi], w[lo:hi], idx[lo:hi], val[lo:hi], lo)
        add(w[lo:hi], eps[lo:hi], s)
    k = 0  # compact the blocks' lists to the front, in index order
    for b in range(nb):
        lo = b * BLOCK
        for j in range(counts[b]):
            idx[k] = idx[lo + j]
            val[k] = val[lo + j]
            k += 1
    return k


@njit(parallel=True, cache=True)
def restore(w, eps, s, idx, val):
    n = w.size
    nb = (n + BLOCK - 1) // BLOCK
    for b in prange(nb):
        lo = b * BLOCK
        hi = min(lo + BLOCK, n)
        sub(w[lo:hi], eps[lo:hi], s)
    for j in range(idx.size):
        w[idx[j]] = val[j]
