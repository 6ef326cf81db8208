"""esopt bench precision on a tiny model: the figures it reports mean what they say."""
import json

import esopt.studies.machine.precision as precision


def test_precision_bench_tiny(esopt_cache, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(precision, "GENERATIONS", 3)
    out = tmp_path / "precision.json"
    res = precision.main("configs/demo.yaml", ["model=tiny-llama", "runtime.threads=1"], str(out))
    data = json.loads(out.read_text())
    rows = data["table"]["paper"]["rows"]
    assert set(rows) == {"float32", *(f"{d}-{r}" for d in ("bfloat16", "float16")
                                      for r in ("compensated", "stochastic", "nearest"))}
    assert rows["float32"]["rel_error"] < 1e-3 and rows["float32"]["perturbed_share_sigma_start"] > 0.99
    for d in ("bfloat16", "float16"):
        # compensation reaches the floor (the exact sum rounded once); nearest loses more of the update
        assert abs(rows[f"{d}-compensated"]["rel_error"] - rows[f"{d}-compensated"]["floor"]) < 1e-3
        assert rows[f"{d}-nearest"]["bias"] < rows[f"{d}-compensated"]["bias"] + 1e-9
        assert abs(rows[f"{d}-stochastic"]["bias"]) < 0.1
    assert rows["bfloat16-nearest"]["perturbed_share_sigma_start"] < 0.9  # bf16 rounds part of sigma 7e-4 away
    assert res["bf16_perturbed_share"] == rows["bfloat16-compensated"]["perturbed_share_sigma_start"]
    assert "RESULT bf16_update_rel_error_20gen=" in capsys.readouterr().out
