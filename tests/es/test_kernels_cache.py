"""numba's cache of the perturb/restore kernels hits across processes: a second run compiles
nothing and adds no cache entry (the kernels in a closure got a new entry in every process)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("numba")

RUN = """
import torch
from esopt.es import kernels
w = torch.randn(1 << 17); eps = torch.randn(1 << 17)
idx = torch.zeros(1 << 17, dtype=torch.int32); val = torch.zeros(1 << 17); lost = torch.zeros(1 << 17, dtype=torch.bool)
k = kernels.perturb(w, eps, 0.01, idx, val, lost)
kernels.restore(w, eps, 0.01, idx[:k], val[:k])
"""


@pytest.mark.slow  # the first process compiles the parallel kernels (~20-40 s)
def test_a_second_process_loads_the_kernels_from_the_cache(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}

    def entries():
        return sorted(p.name for p in tmp_path.rglob("*") if p.is_file())

    subprocess.run([sys.executable, "-c", RUN], env=env, check=True, timeout=600)
    first = entries()
    subprocess.run([sys.executable, "-c", RUN], env=env, check=True, timeout=600)
    assert entries() == first
    assert any("perturb" in name for name in first) and any("restore" in name for name in first)
