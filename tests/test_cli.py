import json
import subprocess
import sys

import pytest

from esopt.cli import main

from conftest import TINY_OVERRIDES


@pytest.mark.parametrize("cmd", [[], ["train"], ["eval"], ["export"], ["bench"], ["adapt"], ["baseline"]])
def test_help(cmd):
    out = subprocess.run([sys.executable, "-m", "esopt", *cmd, "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "usage: esopt" in out.stdout


@pytest.mark.parametrize("override,needle", [
    ("es.populaton=8", "unknown config key 'es.populaton' (did you mean es.population?); allowed here: generations, population"),
    ("env.size=5", "bad value for 'env.options.size': 5"),
    ("es.shaping=softmax", "bad value for 'es.shaping'"),
    ("nonsense", "unexpected argument"),
])
def test_bad_config_exits_nonzero_with_one_line(override, needle, capsys):
    try:
        rc = main(["train", "configs/demo.yaml", override])
    except SystemExit as e:  # argument-shape errors exit via SystemExit
        rc, msg = 2, str(e)
    else:
        msg = capsys.readouterr().err
    assert rc != 0
    assert needle in msg
    assert len(msg.strip().splitlines()) == 1


def test_unknown_model_folder(capsys, tmp_path):
    rc = main(["eval", "configs/demo.yaml", f"run.out_dir={tmp_path}", "--model", "./no/such/model"])
    assert rc == 2 and "model folder ./no/such/model does not exist" in capsys.readouterr().err


def test_train_eval_export_resume_cli(esopt_cache, tmp_path, capsys):
    args = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=2", f"run.out_dir={tmp_path}", "run.name=cli"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "RESULT heldout_reward_base=" in out and out.strip().splitlines()[-1].startswith("RESULT heldout_reward_es=")
    run = tmp_path / "cli"
    assert json.loads((run / "history.json").read_text())["generations"][1]["generation"] == 1
    # the signal diagnostics (algos/es/diagnostics.py): on every training line, and the report's plot of them
    train = [m for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if m.get("kind") == "train"]
    for m in train:
        assert m["diag_tasks"] == 3 and 0 <= m["diag_tied_task_share"] <= 1 and m["diag_pairs"] == 2, m
        assert 1 <= m["diag_distinct_replies"] <= 12 and m["diag_reward_spread"] >= 0, m
    assert (run / "report" / "report-signal.png").exists()
    assert main(["train", "--resume", str(run)]) == 0  # already complete: just re-evaluates
    assert main(["eval", "--run", str(run), "--out", str(tmp_path / "eval.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "RESULT heldout_reward=" in out
    episodes = [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    mean = sum(ep["reward"] for ep in episodes) / len(episodes)
    assert episodes[0]["turns"] and f"RESULT heldout_reward={mean:.4f}" in out
    assert main(["eval", "--run", str(run), "--out", str(tmp_path / "no-such-folder" / "e.jsonl")]) == 2
    assert "no-such-folder does not exist" in capsys.readouterr().err  # refused before the model loads
    assert main(["export", str(run), str(tmp_path / "hf")]) == 0
    assert (tmp_path / "hf" / "config.json").exists() and (tmp_path / "hf" / "model.safetensors").exists()
    assert main(["train", "configs/demo.yaml", *TINY_OVERRIDES, f"run.out_dir={tmp_path}", "run.name=cli"]) == 2
