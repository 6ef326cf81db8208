"""Bad input and careless operation through the real CLI: one line, never a traceback, nothing
created before the check, and no command that can break a run (issue 11, items 1-4)."""
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from esopt.cli import main

from conftest import TINY_OVERRIDES


def train_args(tmp_path, name, *extra):
    return ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=2", f"run.out_dir={tmp_path}",
            f"run.name={name}", *extra]


def one_error_line(capsys) -> str:
    """The one `esopt: error:` line of stderr (progress bars may precede it); no traceback."""
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line.strip() for line in err.replace("\r", "\n").splitlines() if "esopt: error:" in line]
    assert len(lines) == 1 and lines[0].startswith("esopt: error: "), err[-2000:]
    return lines[0]


@pytest.fixture(scope="module")
def trained(esopt_cache, tmp_path_factory):
    """One finished 2-generation tiny run, trained once; tests get copies of it."""
    out = tmp_path_factory.mktemp("trained")
    assert main(train_args(out, "r")) == 0
    return out / "r"


@pytest.fixture
def finished_run(trained, tmp_path, capsys):
    import shutil

    capsys.readouterr()
    return shutil.copytree(trained, tmp_path / "r")


# ----------------------------------------------------------------- 1. no command can break a run

@pytest.mark.parametrize("override", ["es.population=6", "model=tiny-qwen2", "runtime.dtype=bfloat16", "es.noise=gaussian",
                                      "run.seed=5", "es.shaping=centered_rank", "es.antithetic=false", "es.scope=all_linear"])
def test_resume_refuses_overrides_that_change_the_history(finished_run, capsys, override):
    before = (finished_run / "config.yaml").read_bytes()
    assert main(["train", "--resume", str(finished_run), override]) == 2
    line = one_error_line(capsys)
    assert f"{override.split('=')[0]} cannot change on resume" in line
    assert (finished_run / "config.yaml").read_bytes() == before  # nothing written


def test_refused_resume_leaves_the_run_resumable_and_extensible(finished_run, capsys):
    assert main(["train", "--resume", str(finished_run), "es.population=6", "es.generations=3"]) == 2
    capsys.readouterr()
    # a budget extension is allowed, and recorded only after the replay verified
    assert main(["train", "--resume", str(finished_run), "es.generations=3"]) == 0
    assert "generations: 3" in (finished_run / "config.yaml").read_text()
    assert len(json.loads((finished_run / "history.json").read_text())["generations"]) == 3


def test_resume_refuses_fewer_generations_than_done(finished_run, capsys):
    assert main(["train", "--resume", str(finished_run), "es.generations=1"]) == 2
    assert "es.generations=1 is fewer than the 2 already done" in one_error_line(capsys)


def test_config_is_written_only_after_the_replay_is_verified(finished_run, capsys):
    hist = json.loads((finished_run / "history.json").read_text())
    hist["generations"][1]["weights_hash"] = "0" * 64  # replay will not match
    (finished_run / "history.json").write_text(json.dumps(hist))
    before = (finished_run / "config.yaml").read_bytes()
    with pytest.raises(RuntimeError, match="history says 000000000000"):
        main(["train", "--resume", str(finished_run), "es.generations=3"])
    assert (finished_run / "config.yaml").read_bytes() == before


@pytest.mark.parametrize("content,message", [
    ("{\"meta\": {}, \"generations\": [", "is not valid JSON"),
    ("null", "is not an esopt history"),
    ("[]", "is not an esopt history"),
    ("{\"generations\": [{\"generation\": 0}]}", "record 0 is not a generation record"),
], ids=["truncated", "null", "list", "record"])
@pytest.mark.parametrize("command", ["resume", "export", "eval"])
def test_damaged_history_is_one_line_everywhere(finished_run, tmp_path, capsys, content, message, command):
    (finished_run / "history.json").write_text(content)
    argv = {"resume": ["train", "--resume", str(finished_run)], "export": ["export", str(finished_run), str(tmp_path / "x")],
            "eval": ["eval", "--run", str(finished_run)]}[command]
    assert main(argv) == 2
    assert message in one_error_line(capsys)
    assert not (tmp_path / "x").exists()


def test_history_out_of_order_is_refused(finished_run, capsys):
    hist = json.loads((finished_run / "history.json").read_text())
    hist["generations"].reverse()
    (finished_run / "history.json").write_text(json.dumps(hist))
    assert main(["train", "--resume", str(finished_run)]) == 2
    assert "record 0 is generation 1" in one_error_line(capsys)


def test_missing_history_with_trained_metrics_is_refused(finished_run, capsys):
    metrics = (finished_run / "metrics.jsonl").read_bytes()
    (finished_run / "history.json").unlink()
    assert main(["train", "--resume", str(finished_run)]) == 2
    assert "but no history.json" in one_error_line(capsys)
    assert (finished_run / "metrics.jsonl").read_bytes() == metrics  # not restarted, not overwritten


# ----------------------------------------------------------------- 2. one writer per run folder

HOLDER = textwrap.dedent("""
    import sys, time
    from esopt.train.rundir import RunDir
    run = RunDir(sys.argv[1])  # held: a RunDir dropped releases its lock
    run.lock()
    print("locked", flush=True)
    time.sleep(600)
""")


def test_second_writer_refused_readers_work_and_the_lock_dies_with_its_process(finished_run, capsys):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(finished_run)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert main(["train", "--resume", str(finished_run), "es.generations=3"]) == 2
        assert f"being written by another esopt process (pid {holder.pid})" in one_error_line(capsys)
        assert main(["report", str(finished_run)]) == 0  # readers never take the lock
        assert main(["eval", "--run", str(finished_run)]) == 0
    finally:
        holder.send_signal(signal.SIGKILL)  # killed, not closed: no stale lock may remain
        holder.wait()
    assert main(["train", "--resume", str(finished_run), "es.generations=3"]) == 0


def test_a_new_run_under_a_running_runs_name_is_refused(esopt_cache, tmp_path, capsys):
    (tmp_path / "busy").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "busy")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert main(train_args(tmp_path, "busy")) == 2
        assert "being written by another esopt process" in one_error_line(capsys)
        assert not (tmp_path / "busy" / "config.yaml").exists()  # the other writer's folder untouched
    finally:
        holder.kill()
        holder.wait()


# ----------------------------------------------------------------- 3. tolerant readers

def test_torn_and_garbage_metric_lines_never_block_resume_eval_or_report(finished_run, capsys):
    with open(finished_run / "metrics.jsonl", "a") as f:
        f.write("garbage that is not json\n[1, 2]\n{\"kind\": \"train\", \"generation\": 1, \"rew")  # torn, no newline
    assert main(["report", str(finished_run)]) == 0  # the report says how many lines it skipped
    assert "3 unreadable line(s)" in (finished_run / "report" / "report.html").read_text()
    assert main(["eval", "--run", str(finished_run)]) == 0
    assert main(["train", "--resume", str(finished_run), "es.generations=3"]) == 0
    assert "skipped 3 unreadable line(s)" in capsys.readouterr().err
    lines = (finished_run / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]  # every line is JSON again: resume rewrote them consistently
    assert [r["generation"] for r in rows if r.get("kind") == "train"] == [0, 1, 2]


def test_a_torn_last_line_does_not_swallow_the_next_record(tmp_path):
    from esopt.train.rundir import RunDir

    run = RunDir(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"kind": "train", "gen')
    run.log({"kind": "eval", "generation": 0})
    assert run.metrics()[-1]["kind"] == "eval"


def test_report_survives_trajectory_records_of_the_wrong_types(finished_run, capsys):
    bad = [{"reward": "high", "turns": 5, "task": None, "solved": "yes"},
           {"reward": [1], "turns": "abc", "observation0": 7},
           {"reward": 0.5, "turns": [None, 3, {"response": 4, "action": [1], "reward": {}}]},
           "not a record", 12]
    path = next((finished_run / "trajectories").glob("gen*.jsonl"))
    path.write_text("".join(json.dumps(r) + "\n" for r in bad))
    assert main(["report", str(finished_run)]) == 0
    assert (finished_run / "report" / "report.html").stat().st_size > 0


# ----------------------------------------------------------------- 4. one line for every user error

BAD = {
    "odd-population": ["es.population=5"],
    "unknown-device": ["runtime.device=gpu"],
    "blanks": ["env.blanks=40"],
    "env-id": ["env.id=chess"],
    "empty-scope": ["es.scope=[]"],
    "scope-matches-nothing": ["es.scope=[nothing.matches.*]"],
    "alias-typo": ["model=tiny-lama"],
    "unclosed-list": ["es.scope=[a,b"],
}


@pytest.mark.parametrize("case", list(BAD) + ["cuda-without-gpu"])
def test_user_errors_are_one_line_and_create_nothing(esopt_cache, tmp_path, capsys, case):
    if case == "cuda-without-gpu" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    extra = BAD.get(case, ["runtime.device=cuda"])
    out = tmp_path / "runs"
    assert main(["train", "configs/demo.yaml", *TINY_OVERRIDES, f"run.out_dir={out}", "run.name=x", *extra]) == 2
    line = one_error_line(capsys)
    key = extra[0].split("=")[0]
    assert key.split(".")[-1] in line or "did you mean 'tiny-llama'" in line, line
    assert not (out / "x").exists()  # no orphan run folder


def test_overrides_after_options(esopt_cache, tmp_path, capsys):
    assert main(["train", "configs/demo.yaml", "--algo", "grpo", *TINY_OVERRIDES, "grpo.steps=1", "grpo.puzzles_per_step=1",
                 "grpo.group_size=2", f"run.out_dir={tmp_path}", "run.name=g"]) == 0
    assert "algo: grpo" in (tmp_path / "g" / "config.yaml").read_text()


def test_full_disk_stops_cleanly_and_resumes(esopt_cache, tmp_path, capsys, monkeypatch):
    from esopt.es.history import History

    real_save = History.save

    def save(self):
        if len(self.records) == 2:  # generation 1's record does not fit on the disk
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(self)

    monkeypatch.setattr(History, "save", save)
    assert main(train_args(tmp_path, "full", "es.generations=3")) == 2
    line = one_error_line(capsys)
    assert "No space left on device" in line and f"esopt train --resume {tmp_path / 'full'}" in line
    assert len(json.loads((tmp_path / "full" / "history.json").read_text())["generations"]) == 1  # intact
    monkeypatch.setattr(History, "save", real_save)
    assert main(["train", "--resume", str(tmp_path / "full")]) == 0
    assert len(json.loads((tmp_path / "full" / "history.json").read_text())["generations"]) == 3


def test_unwritable_run_folder_is_one_line(esopt_cache, tmp_path, capsys, monkeypatch):
    from pathlib import Path

    real_mkdir = Path.mkdir

    def mkdir(self, *a, **k):  # a read-only file system (root ignores chmod, so it is simulated)
        if "ro" in self.parts:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *a, **k)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    assert main(train_args(tmp_path / "ro", "x")) == 2
    assert "Read-only file system" in one_error_line(capsys)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback of a GPU run")
def test_a_gpu_runs_export_and_eval_work_on_a_cpu_only_machine(finished_run, tmp_path, capsys):
    cfg = (finished_run / "config.yaml").read_text()
    (finished_run / "config.yaml").write_text(cfg.replace("device: cpu", "device: cuda"))
    assert main(["export", str(finished_run), str(tmp_path / "hf")]) == 0
    assert main(["eval", "--run", str(finished_run)]) == 0
    assert "not available here: loading it on the CPU" in capsys.readouterr().out
    assert os.path.exists(tmp_path / "hf" / "esopt_export.json")


def test_demo_bad_input_is_one_line_before_any_folder(esopt_cache, tmp_path, capsys):
    from esopt.demo import run

    assert run(["configs/demo.yaml", *TINY_OVERRIDES, f"run.out_dir={tmp_path}", "env.blanks=40"]) == 2
    assert "env.options.blanks=40 is out of range" in one_error_line(capsys)
    assert not list(tmp_path.iterdir())


def test_a_second_writer_in_the_same_process_is_told_so(tmp_path):
    from esopt.es.history import RunFolderError
    from esopt.train.rundir import RunDir

    first = RunDir(tmp_path)
    first.lock()
    with pytest.raises(RunFolderError, match="already open for writing in this process"):
        RunDir(tmp_path).lock()
    first.close()
    RunDir(tmp_path).lock()  # released by close


def test_temp_files_a_killed_writer_left_are_removed_at_the_next_start(finished_run, capsys):
    """A kill -9 inside an atomic write leaves .NAME.*.tmp behind; the next writer (here a resume that
    extends the run) removes them, and nothing else."""
    left = [finished_run / ".history.json.k1l2.tmp", finished_run / "trajectories" / ".gen_0001.jsonl.x9.tmp"]
    for p in left:
        p.write_text("half a file")
    keep = finished_run / "notes.tmp"  # not an atomic write's temp file: the user's
    keep.write_text("mine")
    assert main(["train", "--resume", str(finished_run), "es.generations=3"]) == 0
    assert not any(p.exists() for p in left) and keep.read_text() == "mine"
    assert not list(finished_run.rglob(".*.tmp"))
