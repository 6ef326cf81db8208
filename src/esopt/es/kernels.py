"""Fused float32 CPU kernels for perturb and restore (numba).

Eager torch needs about ten passes over a chunk to perturb it and find the
elements that subtracting the noise again would not restore exactly (scale,
keep the original, add, subtract back, compare, gather). These kernels do it
in one pass (read w and eps, write w, note the rare lost elements) and the
restore in one more, which puts perturb + restore at the memory bound.

They compute exactly what the torch path computes, element by element:
d = fp32(scale) * eps, w' = w + d (separate float32 multiply and add, no FMA),
and an element is lost when w' - d != w. Results therefore do not depend on
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
    from numba import njit, prange

    @njit(parallel=True, cache=True)
    def perturb(w, eps, s, idx, val):
        n = w.size
        nb = (n + BLOCK - 1) // BLOCK
        counts = np.zeros(nb, np.int64)
        for b in prange(nb):
            lo = b * BLOCK
            hi = min(lo + BLOCK, n)
            c = 0
            for i in range(lo, hi):
                o = w[i]
                d = s * eps[i]
                nw = o + d
                w[i] = nw
                if nw - d != o:
                    idx[lo + c] = i
                    val[lo + c] = o
                    c += 1
            counts[b] = c
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
            for i in range(lo, hi):
                w[i] = w[i] - s * eps[i]
        for j in range(idx.size):
            w[idx[j]] = val[j]

    return perturb, restore


def _threads() -> None:
    import numba

    numba.set_num_threads(max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS)))


def perturb(chunk: torch.Tensor, eps: torch.Tensor, scale: float, idx: torch.Tensor, val: torch.Tensor) -> int:
    """chunk += fp32(scale) * eps in place; the first k entries of idx / val (int32 / float32
    buffers of the chunk's size) receive the positions and original values of the lost elements."""
    _threads()
    return int(_kernels()[0](chunk.numpy(), eps.numpy(), np.float32(scale), idx.numpy(), val.numpy()))


def restore(chunk: torch.Tensor, eps: torch.Tensor, scale: float, idx: torch.Tensor, val: torch.Tensor) -> None:
    """chunk -= fp32(scale) * eps, then chunk[idx] = val."""
    _threads()
    _kernels()[1](chunk.numpy(), eps.numpy(), np.float32(scale), idx.numpy(), val.numpy())
