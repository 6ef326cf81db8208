"""esopt bench population (studies/method/population.py): vanilla ES, small vs large population per backbone."""
import json

import pytest

from conftest import TINY_OVERRIDES


@pytest.mark.slow  # process-heavy: the default tier stays under 5 minutes (docs/design.md)
def test_population_bench_table(esopt_cache, tmp_path):
    from esopt.studies.method.population import main as population

    out = tmp_path / "population.json"
    over = TINY_OVERRIDES + ["es.generations=2", "es.episodes_per_member=2", "eval.every=1"]
    res = population("configs/demo.yaml", over, str(out), models=["tiny-qwen2"], populations=[2, 4])
    data = json.loads(out.read_text())
    assert set(data["table"]) == {"tiny-qwen2"}
    cell = data["table"]["tiny-qwen2"]["4"]
    assert cell["best"] == max(p["reward"] for p in cell["curve"][1:]) and cell["final"] == cell["curve"][-1]["reward"]
    assert res == {"large_minus_small_final_0": cell["final"] - data["table"]["tiny-qwen2"]["2"]["final"]}
    cfg = (tmp_path / "population-runs" / "model0-G4" / "config.yaml").read_text()
    assert "schedule: constant" in cfg and "population: 4" in cfg
