import json
import signal
import subprocess
import sys
from pathlib import Path

from esopt.cli import main

from conftest import TINY_OVERRIDES

ROOT = Path(__file__).resolve().parents[3]
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


# Runs `esopt train ...` in a process that SIGKILLs itself between the checkpoint's two
# renames (checkpoint/ -> checkpoint.old/ done, checkpoint.tmp/ -> checkpoint/ not yet)
# when saving the checkpoint after step KILL_AT.
KILLER = """
import json, os, signal, sys
from pathlib import Path
replace, kill_at = os.replace, int(sys.argv[1])

def replace_or_die(src, dst, *args, **kwargs):
    src = Path(src)
    if src.name == "checkpoint.tmp" and json.loads((src / "state.json").read_text())["step"] == kill_at:
        assert not (src.parent / "checkpoint").exists() and (src.parent / "checkpoint.old").exists()
        os.kill(os.getpid(), signal.SIGKILL)
    return replace(src, dst, *args, **kwargs)

os.replace = replace_or_die
from esopt.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_a_kill_between_the_checkpoint_renames_resumes_from_the_last_complete_one(esopt_cache, tmp_path, capsys):
    def args(name):
        return ["train", "configs/demo.yaml", *TINY_OVERRIDES, *GRPO, "grpo.steps=3", "grpo.checkpoint_every=1",
                f"run.out_dir={tmp_path}", f"run.name={name}", "--algo", "grpo"]

    proc = subprocess.run([sys.executable, "-c", KILLER, "2", *args("killed")], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    run = tmp_path / "killed"
    assert not (run / "checkpoint").exists()  # killed between the renames
    assert json.loads((run / "checkpoint.old" / "state.json").read_text())["step"] == 1
    earlier = (run / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(m)["generation"] for m in earlier if json.loads(m)["kind"] == "train"] == [0, 1]

    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 0
    out = capsys.readouterr().out
    assert "resuming from the last complete one, checkpoint.old/ (step 1)" in out, out
    metrics = (run / "metrics.jsonl").read_text().splitlines()
    assert metrics[:2] == earlier[:2]  # the base evaluation and step 0, as written before the kill
    assert [json.loads(m)["kind"] for m in metrics] == ["eval", "train", "train", "train", "eval"]
    assert [json.loads(m)["generation"] for m in metrics if json.loads(m)["kind"] == "train"] == [0, 1, 2]
    assert json.loads((run / "checkpoint" / "state.json").read_text())["step"] == 3
    assert not (run / "checkpoint.old").exists() and not (run / "checkpoint.tmp").exists()

