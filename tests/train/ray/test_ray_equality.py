"""Ray == local: the same config and seed give the same history.json records, trajectories and
final weights on 2 Ray workers as in one process (pytest -m ray; needs Ray installed)."""
import json

import pytest

from esopt.train.ray.runner import RayRunner
from esopt.es.perturb import weights_hash
from esopt.train.rundir import RunDir
from esopt.algos.es.trainer import Trainer

from dist_helpers import probe_rollout

pytestmark = pytest.mark.ray

MODES = {
    "gaussian": ["es.noise=gaussian"],
    "table": ["es.noise=table", "es.table_size=4194304"],
    # two members per batched rollout: the same units here and on the workers
    "lowrank": ["es.noise=lowrank", "es.rank=2", "es.members_per_rollout=2"],
    "lowrank-others": ["es.noise=lowrank", "es.lowrank_others=full"],
    # a step with memory: each replica keeps its optimizer state by applying every update itself
    # (hashes compared each generation); the driver's and the local run's are the same
    "adam": ["es.optimizer=adam", "es.alpha.start=2e-4", "es.alpha.end=2e-4"],
    "momentum-lowrank-others": ["es.optimizer=momentum", "es.noise=lowrank", "es.lowrank_others=full"],
}
COMMON = ["es.generations=2", "es.sigma.start=0.05", "es.sigma.end=0.05"]


def trained(cfg, runner=None, log=None):
    tr = Trainer(cfg, RunDir.create(cfg), log=log or (lambda *a: None), runner=runner)
    tr.rollout_fn = probe_rollout
    base = weights_hash(tr.model)
    summary = tr.train()
    return tr, base, summary


def history(tr):
    return json.loads((tr.run.path / "history.json").read_text())["generations"]


@pytest.mark.parametrize("mode", list(MODES))
def test_two_workers_give_the_local_history(ray_local, tiny_cfg, mode):
    local, base, _ = trained(tiny_cfg(f"run.name=local-{mode}", *COMMON, *MODES[mode]))
    logs = []
    remote, _, summary = trained(tiny_cfg(f"run.name=ray-{mode}", *COMMON, *MODES[mode]),
                                 RayRunner(workers=2, log=logs.append), logs.append)
    want = history(local)
    assert want[-1]["weights_hash"] != base  # real updates happened
    assert len(set(want[0]["rewards"])) == len(want[0]["rewards"])  # members really differ
    assert history(remote) == want
    assert summary["weights_hash"] == weights_hash(local.model) == weights_hash(remote.model)
    for t in range(2):
        assert remote.run.read_trajectories(f"gen{t:04d}") == local.run.read_trajectories(f"gen{t:04d}")
    assert sum("ready on" in line for line in logs) == 2  # two replicas played
    train = [m for m in remote.run.metrics() if m["kind"] == "train"]
    assert all(m["workers"] == 2 and m["ray_bytes_sent"] > 0 for m in train)


def test_evaluation_split_across_workers_equals_local(ray_local, tiny_cfg):
    """One episode per decoding batch, so slices decode exactly as the whole split does."""
    extra = ["agent.batch_size=1", "tasks.heldout=4"]
    local = Trainer(tiny_cfg("run.name=eval-local", *extra), RunDir.create(tiny_cfg("run.name=eval-local", *extra)),
                    log=lambda *a: None)
    cfg = tiny_cfg("run.name=eval-ray", *extra)
    runner = RayRunner(workers=2, log=lambda *a: None)
    remote = Trainer(cfg, RunDir.create(cfg), log=lambda *a: None, runner=runner)
    try:
        stats_l, eps_l = local.runner.evaluate("heldout", 123)
        stats_r, eps_r = remote.runner.evaluate("heldout", 123)
        assert runner.bytes["received"] > 0 and len(runner.pool) == 2
    finally:
        runner.close()
    assert eps_r == eps_l and len(eps_l) == 4
    assert {k: v for k, v in stats_r.items() if k != "seconds"} == {k: v for k, v in stats_l.items() if k != "seconds"}
