"""A process's compute threads: torch's, and numba's pool for the perturbation kernels."""
from __future__ import annotations

import os
import sys


def set_threads(n: int) -> None:
    """Run torch on n threads, and size numba's thread pool to n if numba is not loaded yet.

    numba.set_num_threads alone is not enough: numba's pool starts one thread per core, and
    after a parallel kernel they spin on the cores torch's threads need. With runtime.threads=1
    on 2 cores (table noise, numba kernels) that made a tiny model's rollouts 10-15x slower and
    perturbation 100x slower here; with the pool sized to n, as fast as without numba.
    """
    import torch

    torch.set_num_threads(n)
    if "numba" not in sys.modules:
        os.environ["NUMBA_NUM_THREADS"] = str(n)
