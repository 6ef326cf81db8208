"""A verifiers environment trains through esopt serve: examples/verifiers_harness.py, in the venv
`make install-verifiers` makes, plays every episode with verifiers (its rollout, interception server,
trace and rubric) against the served members over real HTTP, and the run records the rewards
verifiers gave. CI's verifiers tier installs that venv; without it the tier has nothing to run."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")

from conftest import TINY_OVERRIDES  # noqa: E402
from esopt.cli import main  # noqa: E402

pytestmark = pytest.mark.verifiers
ROOT = Path(__file__).resolve().parents[2]
PYTHON = Path(os.environ.get("ESOPT_VERIFIERS_PYTHON", ROOT / ".venv-verifiers" / "bin" / "python"))


def test_a_verifiers_environment_trains_through_the_server(esopt_cache, tmp_path):
    assert PYTHON.exists(), f"{PYTHON} is missing: run make install-verifiers"
    run = tmp_path / "vf"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = str(Path(__file__).parent)  # the vf_letters taskset
    harness = subprocess.Popen([str(PYTHON), str(ROOT / "examples" / "verifiers_harness.py"), str(run),
                                "--taskset", "vf_letters", "--max-turns", "2"], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = []

    def watch():  # a harness that dies would leave the server waiting: stop it
        out.append(harness.communicate()[0])
        if harness.returncode != 0:
            os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    rc = main(["serve", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=2", "es.episodes_per_member=2",
               "es.sigma.start=0.05", "es.sigma.end=0.02", "es.alpha.start=0.01", "es.alpha.end=0.01",
               "agent.max_new_tokens=4", "eval.at_start=true", "serve.evaluations=harness", f"run.out_dir={tmp_path}",
               "run.name=vf", "--port", "0"])
    thread.join(120)
    assert rc == 0 and harness.returncode == 0, out
    log = out[0]
    assert log.count("[verifiers] generation") == 2 and "failed" not in log, log
    history = json.loads((run / "history.json").read_text())["generations"]
    assert len(history) == 2
    assert any(c != 0 for g in history for c in g["coefficients"])  # verifiers' scores moved the weights
    for t, record in enumerate(history):
        posted = [json.loads(line) for line in (run / "serve" / f"gen{t:04d}.jsonl").read_text().splitlines()]
        assert len(posted) == 4 * 2  # every episode scored by verifiers, none counted as a failure
        assert all(p["metadata"]["turns"] == 2 for p in posted)  # multi-turn: the env's feedback turn was played
        by_member = {}
        for p in posted:
            by_member.setdefault(int(p["episode"].split("-")[1][1:]), []).append(p["reward"])
        assert record["rewards"] == pytest.approx([sum(r) / len(r) for _, r in sorted(by_member.items())])
    # the run is judged on verifiers' task: base and final held-out figures are the scores it posted for them
    summary = json.loads((run / "summary.json").read_text())
    for key, t in (("base", 0), ("final", 2)):
        posted = [json.loads(line)["reward"] for line in (run / "serve" / f"heldout-gen{t:04d}.jsonl").read_text()
                  .splitlines()]
        assert len(posted) == 3 and summary[key]["reward"] == pytest.approx(sum(posted) / 3), (key, posted)
    assert log.count("[verifiers] heldout evaluation") == 2, log
