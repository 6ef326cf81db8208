"""esopt bench dtype at tiny shapes: the speed figures are ratios of the measured medians, and the
parity check trains each seed in both dtypes and compares validation rewards per seed."""
import json

import pytest

from conftest import TINY_OVERRIDES

from esopt.studies.machine import dtype


def test_bench_dtype_speed_tiny(esopt_cache, tmp_path, capsys):
    out = tmp_path / "dtype.json"
    res = dtype.main("configs/demo.yaml", ["model=tiny-llama", "runtime.threads=1"], str(out), repeats=1,
                     prompt_len=8, new_tokens=3, batches=(1, 2))
    data = json.loads(out.read_text())
    med = data["median_tokens_per_s"]
    assert res["bf16_over_fp32_prefill_batch2"] == pytest.approx(med["bfloat16"]["2"]["prefill"] / med["float32"]["2"]["prefill"])
    assert res["bf16_over_fp32_decode"] == res["bf16_over_fp32_decode_batch2"]  # no batch 16: the middle one
    assert all(v > 0 for v in res.values()) and data["cpu_capability"]
    assert "RESULT bf16_over_fp32_prefill=" in capsys.readouterr().out


@pytest.mark.slow  # process-heavy: the default tier stays under 5 minutes (docs/design.md)
def test_bench_dtype_parity_tiny(esopt_cache, tmp_path, capsys):
    out = tmp_path / "parity.json"
    over = TINY_OVERRIDES + ["es.generations=1", "es.population=2", "es.episodes_per_member=2", "tasks.heldout=2",
                             "tasks.validation=2", "agent.max_new_tokens=2"]
    res = dtype.parity("configs/demo.yaml", over, str(out), seeds=[0, 1], jobs=2)
    data = json.loads(out.read_text())
    assert sorted(p.name for p in (tmp_path / "parity-runs").iterdir() if not p.name.endswith(".json")) == [
        "bfloat16-seed0", "bfloat16-seed1", "float32-seed0", "float32-seed1"]
    runs = data["runs"]
    diffs = [b["validation_final"] - f["validation_final"] for f, b in zip(runs["float32"], runs["bfloat16"])]
    assert data["per_seed_bf16_minus_fp32"] == diffs and res["bf16_minus_fp32_validation"] == pytest.approx(sum(diffs) / 2)
    assert all(r["episodes"] == 4 for dt in runs for r in runs[dt])
    assert "bf16_minus_fp32_validation_se" in res and "RESULT bf16_minus_fp32_validation=" in capsys.readouterr().out
