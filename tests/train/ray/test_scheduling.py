"""The scheduling seam without Ray: worker plans, units of members, and a replica playing and
updating exactly as the training process does (so it does not matter which one plays a unit)."""
import sys

import pytest

from esopt.cli import main
from esopt.config import ConfigError
from esopt.train.ray.cluster import Plan, plan_workers
from esopt.train.ray.errors import ReplicaError
from esopt.train.ray.replica import Replica, replay_records
from esopt.es.perturb import weights_hash
from esopt.es.strategy import Member
from esopt.train.members import new_times, play_unit, unit_rollout_seed, work_units
from esopt.train.rundir import RunDir
from esopt.algos.es.trainer import Trainer
from esopt.utils.seeding import derive_seed

from conftest import TINY_OVERRIDES
from dist_helpers import probe_rollout


def test_plan_gives_each_worker_its_share_of_the_cores():
    logs = []
    assert plan_workers(2, None, 2, 0, False) == plan_workers(2, 1, 2, 0, False) == Plan(2, 1, 0)
    lowered = plan_workers(2, 2, 2, 0, False, logs.append)  # 2 x 2 threads on 2 cores: oversubscribed
    assert lowered.threads == 1 and "each worker runs 1 thread(s)" in logs[-1]
    assert plan_workers(1, None, 8, 0, False).threads == 8
    assert plan_workers(None, 2, 8, 0, False).workers == 4
    gpu = plan_workers(None, None, 16, 4, True)
    assert (gpu.workers, gpu.threads, gpu.gpus) == (4, 4, 1)


@pytest.mark.parametrize("args,needle", [
    ((3, 1, 2, 0, False), "--workers 3 is more than the 2 CPU cores"),
    ((0, 1, 2, 0, False), "--workers must be at least 1"),
    ((None, 1, 8, 0, True), "has no GPU"),
    ((3, 1, 16, 2, True), "needs one GPU per worker; the Ray cluster has 2"),
])
def test_plan_refuses_what_cannot_run(args, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        plan_workers(*args)


def members(n=4):
    return [Member(i, 1000 + i // 2, 1 if i % 2 == 0 else -1) for i in range(n)]


def test_units(tiny_cfg):
    lowrank = Trainer(tiny_cfg("run.name=u-lr", "es.noise=lowrank"), RunDir.create(tiny_cfg("run.name=u-lr", "es.noise=lowrank")),
                      log=lambda *a: None)
    ms = members()
    assert work_units(ms, lowrank.cfg, lowrank.perturber) == [ms]  # locally: the whole population, as before
    assert work_units(ms, lowrank.cfg, lowrank.perturber, batch=3) == [ms[:3], ms[3:]]
    # the whole population keeps the generation's rollout seed (local runs unchanged); a part gets its own
    assert unit_rollout_seed(0, 5, ms, 4) == derive_seed("rollout", 0, 5)
    assert unit_rollout_seed(0, 5, ms[2:], 4) != unit_rollout_seed(0, 5, ms[:2], 4)
    full = Trainer(tiny_cfg("run.name=u-full"), RunDir.create(tiny_cfg("run.name=u-full")), log=lambda *a: None)
    assert work_units(ms, full.cfg, full.perturber, batch=3) == [[m] for m in ms]


def test_local_lowrank_units_are_batched_rollouts(tiny_cfg):
    """es.members_per_rollout=2: two members per rollout, one rollout per unit."""
    cfg = tiny_cfg("run.name=lr-units", "es.noise=lowrank", "es.members_per_rollout=2", "es.generations=1")
    tr = Trainer(cfg, RunDir.create(cfg), log=lambda *a: None)
    seen = []

    def counting(policy, envs, ids, obs, cfg, seed, on_turn=None, rows=None):
        seen.append(sorted(set(rows.groups)))
        return probe_rollout(policy, envs, ids, obs, cfg, seed, on_turn, rows)

    tr.rollout_fn = counting
    tr.generation(0)
    assert seen == [[0, 1], [0, 1]]
    rec = tr.history.records[0]
    assert len(set(rec["rewards"])) == 4 and rec["weights_hash"] != tr.history.meta["base_weights_hash"]


@pytest.mark.parametrize("noise", ["gaussian", "lowrank"])
def test_replica_plays_and_updates_as_the_trainer(tiny_cfg, noise):
    """A replica (what a Ray worker holds), built apart from the trainer, plays any unit of members
    to the same rewards and episodes, applies the same update to the same weights hash, and a new
    replica replaying the history reaches the trainer's weights."""
    extra = [f"es.noise={noise}", "es.members_per_rollout=2", "es.sigma.start=0.05",
             "es.sigma.end=0.05"]
    cfg = tiny_cfg(f"run.name=rep-{noise}", *extra)
    tr = Trainer(cfg, RunDir.create(cfg), log=lambda *a: None)
    tr.rollout_fn = probe_rollout
    base = tr.history.meta["base_weights_hash"]
    replica = Replica(cfg, 0, 1, base, [], probe_rollout)
    ms = tr.step.ask(0)
    sigma, _ = tr.step.values(0)
    for unit in reversed(work_units(ms, cfg, tr.perturber, batch=2)):  # in another order than the trainer's
        got = replica.play(unit, sigma, 0, len(ms))
        want = play_unit(tr, unit, sigma, 0, len(ms), new_times())
        assert (got["rewards"], got["traj"], got["errors"]) == want
    tr.generation(0)
    rec = tr.history.records[0]
    assert replica.update(0, rec["seeds"], rec["coefficients"], rec["alpha"], rec["population"]) == rec["weights_hash"]
    tr.generation(1)
    assert Replica(cfg, 1, 1, base, replay_records(tr.history.records)).weights_hash() == weights_hash(tr.model)
    tampered = replay_records(tr.history.records)
    tampered[-1]["weights_hash"] = "0" * 64
    with pytest.raises(ReplicaError, match="replica 2 on .*: replaying 2 generations gave weights hash"):
        Replica(cfg, 2, 1, base, tampered)
    with pytest.raises(ReplicaError, match="cannot apply generation 5"):
        replica.update(5, rec["seeds"], rec["coefficients"], rec["alpha"], rec["population"])


def test_cli_ray_flags_are_checked_first(tmp_path, capsys, monkeypatch):
    base = ["train", "configs/demo.yaml", *TINY_OVERRIDES, f"run.out_dir={tmp_path}", "run.name=flags"]
    assert main(base + ["--workers", "0"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    assert main(base + ["--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'esopt[ray]'" in err and len(err.strip().splitlines()) == 1
    assert main(base + ["--algo", "grpo", "--ray-address", "auto"]) == 2
    err = capsys.readouterr().err
    assert "the GRPO baseline runs in one process" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "flags").exists()  # nothing was created


def test_worker_threads_also_size_numbas_pool():
    """A worker (or training process) on fewer threads than cores sizes numba's pool to them before
    numba loads: its default pool (one thread per core) starved torch's threads many-fold."""
    import subprocess

    code = ("from esopt.utils.threads import set_threads; set_threads(1); import numba, torch; "
            "print(numba.config.NUMBA_NUM_THREADS, torch.get_num_threads())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "1"]
