"""Fused float32 CPU kernels for perturb and restore (numba).

Eager torch needs about ten passes over a chunk to perturb it and find the
elements that subtracting the noise again would not restore exactly (scale,
keep the original, add, subtract back, compare, gather). These kernels work
block by block (64K elements, in cache): mark the lost elements, keep their
original values, add; restore subtracts and writes those values back. Each
reads w and eps from memory once and writes w once.

They compute exactly what the torch path computes, element by element:
d = fp32(scale) * eps, w' = w + d (separate float32 multiply and add, no FMA),
and an element is lost when the bits of w' - d differ from w's (so -0.0 is kept). Results therefore do not depend on
which path ran or on the thread count. Other dtypes and devices use torch.
"""
from __future__ import annotations

import importlib.util

import numpy as np
import torch

BLOCK = 1 << 16  # elements per parallel block; lost indices of a block stay in order
_HAVE_NUMBA = importlib.util.find_spec("numba") is not None
_compiled = None  # (perturb, restore), compiled (or loaded from numba's cache) on first use


def available(chunk: torch.Tensor) -> bool:
    return _HAVE_NUMBA and chunk.dtype == torch.float32 and chunk.device.type == "cpu" and chunk.is_contiguous()


def _kernels():
    """numba is imported on first use only (~60 MB of RSS, ~45 MB more once the
    kernels are loaded), so processes that never perturb (evaluation) don't pay it."""
    global _compiled
    if _compiled is None:
        _compiled = _build()
    return _compiled


def _build():  # pragma: no cover - the bodies are compiled by numba
    import math

    from numba import njit, prange

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

    return perturb, restore


def _threads() -> None:
    import numba

    numba.set_num_threads(max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS)))


def perturb(chunk: torch.Tensor, eps: torch.Tensor, scale: float, idx: torch.Tensor, val: torch.Tensor,
            lost: torch.Tensor) -> int:
    """chunk += fp32(scale) * eps in place; the first k entries of idx / val (int32 / float32
    buffers of the chunk's size) receive the positions and original values of the lost
    elements; lost is a bool work buffer of the chunk's size."""
    _threads()
    return int(_kernels()[0](chunk.numpy(), eps.numpy(), np.float32(scale), idx.numpy(), val.numpy(), lost.numpy()))


def restore(chunk: torch.Tensor, eps: torch.Tensor, scale: float, idx: torch.Tensor, val: torch.Tensor) -> None:
    """chunk -= fp32(scale) * eps, then chunk[idx] = val."""
    _threads()
    _kernels()[1](chunk.numpy(), eps.numpy(), np.float32(scale), idx.numpy(), val.numpy())
