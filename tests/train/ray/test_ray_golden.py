"""ES on 2 Ray workers gives the full-rank record of tests/golden (written before the restructuring)."""
import importlib
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

GOLDEN = Path(__file__).parents[2] / "golden"


def test_two_ray_workers_give_the_full_rank_record(ray_local, esopt_cache, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(GOLDEN))  # golden_env:Letters; the workers are told this path
    golden = importlib.import_module("test_golden")
    got = golden.train(tmp_path, "ray", golden.CASES["gaussian"], "--workers", "2")
    want = golden.recorded("gaussian")
    assert got["history"] == want["history"] and got["weights_hash"] == want["weights_hash"]
    assert got["trajectories"] == want["trajectories"] and got["evals"] == want["evals"]
