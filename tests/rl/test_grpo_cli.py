import json

from esopt.cli import main

from conftest import TINY_OVERRIDES

GRPO = ["grpo.steps=2", "grpo.puzzles_per_step=2", "grpo.group_size=2", "grpo.lr=1e-4"]


def test_train_grpo_eval_export_resume_cli(esopt_cache, tmp_path, capsys):
    args = ["train", "configs/demo.yaml", *TINY_OVERRIDES, *GRPO, f"run.out_dir={tmp_path}", "run.name=g", "--algo", "grpo"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "RESULT heldout_reward_base=" in out and out.strip().splitlines()[-1].startswith("RESULT heldout_reward_grpo=")
    run = tmp_path / "g"
    assert "algo: grpo" in (run / "config.yaml").read_text()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["algo"] == "grpo" and summary["generations"] == 2 and summary["episodes_per_generation"] == 4
    assert {"base", "final", "improvement"} <= set(summary) and summary["final"]["n"] == 3
    kinds = [json.loads(line)["kind"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert kinds == ["eval", "train", "train", "eval"]
    assert len((run / "trajectories" / "gen0001.jsonl").read_text().splitlines()) == 4
    assert not (run / "history.json").exists() and (run / "checkpoint" / "model.safetensors").exists()

    assert main(["eval", "--run", str(run)]) == 0  # loads the checkpoint's weights
    assert f"RESULT heldout_reward={summary['final']['reward']:.4f}" in capsys.readouterr().out
    assert main(["export", str(run), str(tmp_path / "hf")]) == 0
    assert json.loads((tmp_path / "hf" / "esopt_export.json").read_text())["weights_hash"] == summary["weights_hash"]
    assert main(["train", "--resume", str(run)]) == 0  # complete already: re-evaluates
    assert main(["train", "configs/demo.yaml", *TINY_OVERRIDES, f"run.out_dir={tmp_path}", "run.name=g"]) == 2


def test_config_file_algo_key_and_greedy_refusal(esopt_cache, tmp_path, capsys):
    cfg = tmp_path / "grpo.yaml"
    cfg.write_text("algo: grpo\ngrpo:\n  temperature: null\nagent:\n  sampling: {temperature: 0.0}\n")
    rc = main(["train", str(cfg), *TINY_OVERRIDES, f"run.out_dir={tmp_path}", "run.name=greedy"])
    err = capsys.readouterr().err
    assert rc == 2 and "algo=grpo needs sampled training episodes" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "greedy").exists()
    rc = main(["train", str(cfg), *TINY_OVERRIDES, *GRPO, "grpo.temperature=0.8", "grpo.steps=1",
               f"run.out_dir={tmp_path}", "run.name=fromfile", "eval.at_start=false"])
    assert rc == 0 and json.loads((tmp_path / "fromfile" / "summary.json").read_text())["algo"] == "grpo"
