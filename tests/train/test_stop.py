"""Ctrl-C and SIGTERM on a real training process: the first stops at a safe point with one line
(what was kept, the exact resume command), a second stops at once; the history stays whole and
the run resumes to the end."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from conftest import TINY_OVERRIDES

from esopt.cli import main


def start(tmp_path, name, *extra):
    args = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=200", "eval.at_start=false",
            f"run.out_dir={tmp_path}", f"run.name={name}", *extra]
    return subprocess.Popen([sys.executable, "-m", "esopt", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def generations(run) -> int:
    try:
        return len(json.loads((run / "history.json").read_text())["generations"])
    except (OSError, ValueError, KeyError):
        return 0


def wait_for(proc, run, n=1, timeout=120):
    t0 = time.time()
    while generations(run) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.time() - t0 < timeout, "no generation recorded in time"
        time.sleep(0.2)


@pytest.mark.parametrize("signals", [[signal.SIGINT], pytest.param([signal.SIGTERM], marks=pytest.mark.slow),
                                     pytest.param([signal.SIGINT, signal.SIGINT], marks=pytest.mark.slow)])
def test_a_signal_stops_the_run_with_its_resume_line(esopt_cache, tmp_path, capsys, signals):
    name = "-".join(s.name for s in signals)
    run = tmp_path / name
    # twice: generations of some seconds, so that the second Ctrl-C comes while one is being played
    proc = start(tmp_path, name, *(["es.episodes_per_member=256"] if len(signals) == 2 else []))
    wait_for(proc, run)
    if len(signals) == 2:  # well inside the next generation (some seconds long), not at the boundary after a record
        time.sleep(2)
    for s in signals:
        proc.send_signal(s)
        time.sleep(0.05)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    last = err.strip().splitlines()[-1]
    # twice: at once, unless the generation in progress ended in the 50 ms between the two (then the first one's
    # safe point came first: a 1-in-20 race on a fast machine, seen in CI)
    hows = ("now", "at a safe point") if len(signals) == 2 else ("at a safe point",)
    kept = generations(run)  # history.json parses: never torn
    assert last in [f"[esopt] stopped {how}: {run} keeps {kept} of 200 generations (its history); continue with: "
                    f"esopt train --resume {run}" for how in hows], last
    assert "Traceback" not in err
    if len(signals) == 1:
        assert "stopping after the update in progress is recorded" in out
    assert main(["train", "--resume", str(run), "es.generations=" + str(kept + 1)]) == 0  # and it goes on
    assert generations(run) == kept + 1


def test_ctrl_c_during_an_evaluation_stops_it_at_once_and_the_resume_plays_it_once(esopt_cache, tmp_path, capsys):
    """The base evaluation (1000 episodes: far longer than the test waits) ends at the Ctrl-C, not after all
    of them (then the stop would come at the safe point after it), and the line names it."""
    name = "eval"
    run = tmp_path / name
    args = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=1", "eval.at_start=true",
            "tasks.heldout=1000", f"run.out_dir={tmp_path}", f"run.name={name}"]
    proc = subprocess.Popen([sys.executable, "-m", "esopt", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    t0 = time.time()
    while not (run / "config.yaml").exists():
        assert proc.poll() is None and time.time() - t0 < 60, proc.communicate()
        time.sleep(0.1)
    time.sleep(3)  # the model loaded, the base evaluation under way
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Ctrl-C: stopping the held-out evaluation after 0 generations now" in out, out
    last = err.strip().splitlines()[-1]
    assert last == (f"[esopt] stopped during the held-out evaluation after 0 generations (not recorded: the resume "
                    f"plays it): {run} keeps 0 of 1 generations (its history); continue with: esopt train --resume "
                    f"{run}"), last
    assert not (run / "trajectories" / "eval_gen0000.jsonl").exists()  # nothing of it recorded
