"""Ctrl-C and SIGTERM in the phases outside training's safe points (train/stop.py interrupt_on_signals): the
pre-run check, an evaluation whose stop comes while the env works, `esopt eval`, and a bench whose training
runs are child processes. Each ends within seconds, with one line that says what was and was not written,
exit code 130, and no traceback; a second signal ends the process at once even while cleanup hangs."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TINY_OVERRIDES

HERE = Path(__file__).resolve().parent


def esopt(*args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "esopt", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def wait_for(proc: subprocess.Popen, ready, timeout: float = 120) -> None:
    t0 = time.time()
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.time() - t0 < timeout, "not ready in time"
        time.sleep(0.1)


def signalled(proc: subprocess.Popen, sig, timeout: float = 30) -> tuple[str, str, float]:
    """Send sig; (stdout, stderr, seconds until the process ended)."""
    t0 = time.time()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=timeout)
    return out, err, time.time() - t0


def train_args(tmp_path, env: str, *extra) -> list[str]:
    return ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=2", f"env.id=misbehaving_envs:{env}",
            "agent.system_prompt=", *extra, f"run.out_dir={tmp_path}", "run.name=r"]


@pytest.mark.parametrize("sig, name", [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_a_signal_during_the_pre_run_check_ends_it_with_one_line(esopt_cache, tmp_path, sig, name):
    """The check says what it checks before it starts; the stop comes while the env's step sleeps."""
    marker = tmp_path / "stepping"
    proc = esopt(*train_args(tmp_path, "SlowOnCheck", f"env.options.marker={marker}"))
    first = proc.stdout.readline()  # the check's own line comes before the check
    wait_for(proc, marker.exists)
    assert first.startswith("[esopt] pre-run check: one env.id=misbehaving_envs:SlowOnCheck env of each split "
                            "(train, held-out) built, reset, stepped with an empty reply and closed; each call "
                            "limited to run.call_timeout_s=300 s"), first
    out, err, seconds = signalled(proc, sig)
    assert proc.returncode == 130, err
    assert seconds < 10
    assert err.strip().splitlines()[-1] == (f"[esopt] stopped by {name} during the pre-run check: nothing was "
                                            "written (it runs before any folder or file)"), err
    assert "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_a_second_ctrl_c_ends_at_once_while_cleanup_hangs(esopt_cache, tmp_path):
    """The first Ctrl-C interrupts the check's step; its env's close() then never returns; the second ends it."""
    marker = tmp_path / "stepping"
    proc = esopt(*train_args(tmp_path, "SlowOnCheck", "env.options.hang_close=true", f"env.options.marker={marker}"))
    wait_for(proc, marker.exists)
    proc.send_signal(signal.SIGINT)
    time.sleep(2)
    assert proc.poll() is None  # stuck in close()
    out, err, seconds = signalled(proc, signal.SIGINT)
    assert proc.returncode == 130 and seconds < 5, err
    assert err.strip().splitlines()[-1] == "[esopt] Ctrl-C again: ended at once", err


def test_sigterm_while_an_evaluation_s_env_works_is_not_recorded(esopt_cache, tmp_path):
    """The stop comes after the evaluation's last decode step, while the env scores the replies: the line says
    the evaluation is not recorded, and it is not (it was recorded, and the run stopped later, before)."""
    marker = tmp_path / "stepping"
    proc = esopt(*train_args(tmp_path, "SlowReplies", "eval.at_start=true", f"env.options.marker={marker}"))
    wait_for(proc, marker.exists)  # the base evaluation's first reply is being scored
    out, err, seconds = signalled(proc, signal.SIGTERM, timeout=60)
    assert proc.returncode == 130, err
    assert "SIGTERM: stopping the held-out evaluation after 0 generations now (it is not recorded" in out, out
    run = tmp_path / "r"
    assert err.strip().splitlines()[-1].startswith(
        "[esopt] stopped during the held-out evaluation after 0 generations (not recorded: the resume plays it): "
        f"{run} keeps 0 of 2 generations"), err
    assert not (run / "trajectories" / "eval_gen0000.jsonl").exists()
    metrics = run / "metrics.jsonl"
    assert not metrics.exists() or not [m for m in map(json.loads, metrics.read_text().splitlines())
                                        if m.get("kind") == "eval"]


@pytest.mark.parametrize("sig, name", [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_esopt_eval_stops_with_one_line_and_writes_nothing(esopt_cache, tmp_path, sig, name):
    marker, out_file = tmp_path / "stepping", tmp_path / "episodes.jsonl"
    proc = esopt("eval", "configs/demo.yaml", "--model", "tiny-llama", *TINY_OVERRIDES[1:],
                 "env.id=misbehaving_envs:SlowReplies", f"env.options.marker={marker}", "agent.system_prompt=",
                 "--out", str(out_file))
    wait_for(proc, marker.exists)
    out, err, seconds = signalled(proc, sig)
    assert proc.returncode == 130 and seconds < 10, err
    assert err.strip().splitlines()[-1] == (f"[esopt] stopped by {name} during the held-out evaluation: nothing of it "
                                            "was written (its figures and episodes are written when it ends)"), err
    assert "Traceback" not in err and "RESULT" not in out
    assert not out_file.exists()


@pytest.mark.slow
def test_ctrl_c_to_bench_compare_stops_its_training_run_at_a_safe_point(esopt_cache, tmp_path):
    """Sent to the bench's process alone (not its process group): the training run under way is told, stops at a
    safe point (its history kept, resumable), and the bench ends with one line instead of a traceback."""
    out = tmp_path / "c.json"
    proc = esopt("bench", "compare", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=300", "tasks.heldout=2",
                 "tasks.validation=2", "--seeds", "0", "--grpo-lrs", "1e-5", "--es-sigmas", "0.05", "--out", str(out))
    history = tmp_path / "c-runs" / "es-sigma0.05-seed0" / "history.json"

    def trained():
        try:
            return len(json.loads(history.read_text())["generations"]) > 0
        except (OSError, ValueError, KeyError):
            return False

    wait_for(proc, trained)
    stdout, err, seconds = signalled(proc, signal.SIGINT, timeout=60)
    assert proc.returncode == 130 and seconds < 30, err
    assert "[bench] Ctrl-C: 1 training run(s) under way stop at their safe points" in stdout, stdout
    assert err.strip().splitlines()[-1] == (
        f"[esopt] stopped by Ctrl-C during esopt bench compare (training run es-sigma0.05-seed0): {out} was not "
        f"written; the runs finished before it stay in {tmp_path / 'c-runs'}, with es-sigma0.05-seed0 stopped (at its "
        "safe point, or at once on a second Ctrl-C): it resumes when the same command runs again"), err
    assert "Traceback" not in err
    assert not out.exists() and not (history.parent / "summary.json").exists() and trained()
