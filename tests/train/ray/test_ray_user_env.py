"""An env of one's own (tests/envs/guess_env.py) played on 2 Ray workers: the workers import it
from the driver's path (ESOPT_ENV_PATH) and the history equals the one-process run's."""
import json
from pathlib import Path

import pytest
from conftest import TINY_OVERRIDES

from esopt.cli import main

pytestmark = pytest.mark.ray

ENVS = str(Path(__file__).parents[2] / "envs")


def test_a_user_env_trains_on_two_workers_as_in_one_process(ray_local, tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(ENVS)  # the driver imports guess_env from here; the workers are told where
    args = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=2", f"run.out_dir={tmp_path}",
            "eval.at_start=false", "env.id=guess_env:GuessEnv", "env.options.high=4", "env.max_turns=3",
            "es.sigma.start=0.05", "es.sigma.end=0.05"]
    assert main(args + ["run.name=local"]) == 0
    assert main(args + ["run.name=ray", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "Ray: 2 worker(s) x 1 thread(s)" in out
    hist = [json.loads((tmp_path / name / "history.json").read_text())["generations"] for name in ("local", "ray")]
    strip = [[{k: v for k, v in g.items() if k in ("seeds", "rewards", "coefficients", "weights_hash")} for g in h]
             for h in hist]
    assert strip[0] == strip[1] and len(strip[0]) == 2
