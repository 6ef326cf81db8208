"""run.budget_seconds (train/loop.py): training stops at equal wall-clock instead of equal updates,
with the final evaluation and summary of the updates made; bench compare --budget-seconds passes it
to every run."""
import json

import pytest

from conftest import TINY_OVERRIDES

from esopt.train.loop import spent_before, training_seconds


def test_es_run_stops_when_its_training_seconds_reach_the_budget(tiny_cfg):
    from esopt.train.rundir import RunDir
    from esopt.algos.es.trainer import Trainer

    cfg = tiny_cfg("run.budget_seconds=1e-6", "run.name=budget")  # any update takes longer: one update
    lines = []
    tr = Trainer(cfg, RunDir.create(cfg), log=lines.append)
    summary = tr.train()
    assert summary["generations"] == 1 and summary["planned_generations"] == 3
    assert len(json.loads((tr.run.path / "history.json").read_text())["generations"]) == 1
    evals = [m["generation"] for m in tr.run.metrics() if m["kind"] == "eval"]
    assert evals == [0, 1] and "final" in summary and "improvement" in summary
    full = tiny_cfg("run.name=nobudget")
    assert Trainer(full, RunDir.create(full), log=lambda *a: None).train()["generations"] == 3
    assert "planned_generations" not in json.loads((RunDir(tr.run.path.parent / "nobudget").path /
                                                    "summary.json").read_text())


def test_grpo_run_stops_at_the_budget(esopt_cache, tmp_path):
    from esopt.cli import main

    args = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "grpo.steps=3", "grpo.puzzles_per_step=2",
            "grpo.group_size=2", "run.budget_seconds=1e-6", f"run.out_dir={tmp_path}", "run.name=g", "--algo", "grpo"]
    assert main(args) == 0
    summary = json.loads((tmp_path / "g" / "summary.json").read_text())
    assert summary["algo"] == "grpo" and summary["generations"] == 1 and summary["planned_generations"] == 3


def test_a_resumed_run_counts_the_seconds_of_earlier_updates():
    class Run:
        def metrics(self):
            return [{"kind": "eval", "generation": 0, "heldout_seconds": 50.0},
                    {"kind": "train", "generation": 0, "time_rollout": 2.0, "time_update": 1.5, "reward_mean": 0.3},
                    {"kind": "train", "generation": 1, "time_rollout": 4.0, "time_perturb": 0.5},
                    {"kind": "train", "generation": 2, "time_rollout": 100.0}]  # not reached the history

    assert training_seconds({"time_rollout": 2.0, "time_update": 1.5, "seconds": 9.0}) == 3.5
    assert spent_before(Run(), 2) == 8.0 and spent_before(Run(), 0) == 0.0


def test_budget_setting_is_checked():
    from esopt.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="budget_seconds"):
        load_config(None, ["run.budget_seconds=0"])
    assert load_config(None, ["run.budget_seconds=90"]).run.budget_seconds == 90


def test_compare_at_equal_wall_clock(monkeypatch, tmp_path, capsys):
    from esopt.studies.method import compare
    from esopt.config import ConfigError

    calls = []

    def fake(config, overrides, out_dir, name, log=print, records=None):
        calls.append(list(overrides))
        arm = name.split("-")[0]
        episodes = 96 if arm == "es" else 32  # ES plays three times as many episodes in the same seconds
        return {"run_dir": f"{out_dir}/{name}", "peak_rss_mb": 1.0, "peak_cuda_mb": None, "wall_seconds": 70.0,
                "summary": {"base": {"reward": 0.1}, "final": {"reward": 0.2},
                            "improvement": {"mean": 0.1, "se": 0.01}},
                "curve": [{"generation": 0, "episodes": 0, "train_seconds": 0.0, "reward": 0.1, "validation": 0.1},
                          {"generation": 3, "episodes": episodes, "train_seconds": 61.0, "reward": 0.2,
                           "validation": 0.3}]}

    monkeypatch.setattr(compare, "train_run", fake)
    out = tmp_path / "c.json"
    res = compare.main("configs/demo.yaml", ["es.generations=8", "es.episodes_per_member=16"], str(out), seeds=[0, 1],
                       grpo_lrs=[1e-5],
                       es_sigmas=[0.004], budget_seconds=60)
    assert all("run.budget_seconds=60" in c for c in calls) and len(calls) == 6  # 2 sweep + 2 x 2 final
    assert res["es_over_grpo_episodes"] == 3.0
    data = json.loads(out.read_text())
    assert data["budget_seconds"] == 60 and data["table"]["es"]["episodes_per_seed"] == [96, 96]
    assert "60 s of training (at most 1024 episodes)" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="--budget-seconds"):
        compare.main("configs/demo.yaml", [], str(tmp_path / "d.json"), seeds=[0], budget_seconds=0)
