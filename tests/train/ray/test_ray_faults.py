"""Faults on Ray: a worker killed mid-generation, a driver killed mid-run, a member failing in its
episodes, a replica whose weights drift. Nothing is lost and the result is the fault-free one
(pytest -m ray; needs Ray installed)."""
import json
from functools import partial

import pytest

from esopt.cli import main
from esopt.train.ray.errors import ReplicaMismatchError
from esopt.train.ray.runner import RayRunner
from esopt.es.perturb import weights_hash
from esopt.train.rundir import RunDir
from esopt.algos.es.trainer import Trainer
from esopt.utils.seeding import derive_seed

from conftest import TINY_OVERRIDES
from dist_helpers import calls, corrupting_rollout, dying_rollout, failing_rollout, probe_rollout

pytestmark = pytest.mark.ray

COMMON = ["es.generations=2", "es.sigma.start=0.05", "es.sigma.end=0.05", "eval.at_start=false"]


def make(cfg, rollout, runner=None, logs=None, run=None):
    log = logs.append if logs is not None else (lambda *a: None)
    tr = Trainer(cfg, run or RunDir.create(cfg), log=log, runner=runner)
    tr.rollout_fn = rollout
    return tr


def records(tr):
    return json.loads((tr.run.path / "history.json").read_text())["generations"]


@pytest.fixture
def fault_free(tiny_cfg):
    """The uninterrupted local run every fault test must reproduce."""
    tr = make(tiny_cfg("run.name=fault-free", *COMMON), probe_rollout)
    tr.train()
    return records(tr), weights_hash(tr.model)


@pytest.mark.parametrize("workers", [2, 1])
def test_worker_killed_mid_generation(ray_local, tiny_cfg, tmp_path, fault_free, workers):
    """The worker playing generation 1's second member is killed: that member is played again (on
    the other worker, or on a replacement that replays generation 0) and the run ends as without."""
    logs = []
    rollout = partial(dying_rollout, counter=str(tmp_path / "calls"), die_at=6)  # 4 members per generation
    tr = make(tiny_cfg("run.name=killed-worker", *COMMON), rollout, RayRunner(workers=workers, log=logs.append), logs)
    summary = tr.train()
    want, want_hash = fault_free
    assert records(tr) == want and summary["weights_hash"] == want_hash
    assert calls(tmp_path / "calls") == 9  # 8 members, one of them twice
    assert any("Ray replica" in line and "died" in line for line in logs)
    # the replacement replayed generation 0, hash-verified, before it took work
    assert any("replayed 1 generation(s)" in line and "hash verified" in line for line in logs)


def test_driver_killed_resumes_on_ray(ray_local, tiny_cfg, fault_free):
    cfg = tiny_cfg("run.name=killed-driver", *COMMON)
    first = make(cfg, probe_rollout, RayRunner(workers=2, log=lambda *a: None))
    first.generation(0)
    first.runner.close()  # the driver dies: its workers go with it; only the run folder remains
    path = first.run.path
    del first
    run = RunDir(path)
    second = make(run.load_config(), probe_rollout, RayRunner(workers=2, log=lambda *a: None), run=run)
    start = second.resume()
    assert start == 1
    summary = second.train(start)
    want, want_hash = fault_free
    assert records(second) == want and summary["weights_hash"] == want_hash


def test_failing_member_is_recorded_not_retried(ray_local, tiny_cfg, tmp_path):
    fail = {derive_seed("rollout", 0, 0, 1)}  # member 1 of generation 0 (run seed 0)
    histories = []
    for name, runner in (("fail-local", None), ("fail-ray", RayRunner(workers=2, log=lambda *a: None))):
        counter = tmp_path / f"{name}.calls"
        tr = make(tiny_cfg(f"run.name={name}", *COMMON), partial(failing_rollout, counter=str(counter), fail_seeds=fail),
                  runner)
        tr.train()
        assert calls(counter) == 8  # every member once: the failed one was not played again
        histories.append(records(tr))
    assert histories[1] == histories[0]
    rec = histories[1][0]
    assert rec["rewards"][1] is None and rec["nonfinite_rewards"] == 1
    assert "episode exploded" in rec["member_errors"]["1"]


def test_replica_whose_weights_drift_stops_the_run(ray_local, tiny_cfg, tmp_path):
    rollout = partial(corrupting_rollout, counter=str(tmp_path / "calls"), at=2)
    cfg = tiny_cfg("run.name=drift", *COMMON)
    tr = make(cfg, rollout, RayRunner(workers=2, log=lambda *a: None))
    try:
        with pytest.raises(ReplicaMismatchError, match=r"Ray replica [01] has weights hash \w+ after generation 0"):
            tr.generation(0)
    finally:
        tr.runner.close()
    assert not (tr.run.path / "history.json").exists()  # the generation was not recorded


def test_cli_workers_and_resume(ray_local, tmp_path, capsys):
    """esopt train --workers N (here on the test's Ray instance), then --resume on Ray."""
    args = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=1", f"run.out_dir={tmp_path}",
            "run.name=cli-ray", "eval.at_start=false"]
    assert main(args + ["--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "Ray: 2 worker(s) x 1 thread(s)" in out and "RESULT heldout_reward_es=" in out
    run = tmp_path / "cli-ray"
    assert main(["train", "--resume", str(run), "es.generations=2", "--workers", "1"]) == 0
    assert [r["generation"] for r in json.loads((run / "history.json").read_text())["generations"]] == [0, 1]


def test_replica_that_cannot_start_stops_the_run(ray_local, tiny_cfg):
    """A replica whose base model is not the run's (here: the run claims another base) is an error
    naming it, not a worker to replace forever."""
    from esopt.train.ray.errors import ReplicaError

    cfg = tiny_cfg("run.name=wrong-base", *COMMON)
    tr = make(cfg, probe_rollout, RayRunner(workers=1, log=lambda *a: None))
    tr.history.meta["base_weights_hash"] = "0" * 64
    try:
        with pytest.raises(ReplicaError, match="Ray replica 0 could not start: .*not the base model of this run"):
            tr.generation(0)
    finally:
        tr.runner.close()
