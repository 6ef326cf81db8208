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


def _build():
    from . import kernels_numba  # compiles, or loads from numba's cache, on import

    return kernels_numba.perturb, kernels_numba.restore


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
