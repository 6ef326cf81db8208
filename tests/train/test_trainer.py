import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from esopt.agent.rollout import Episode
from esopt.es.perturb import weights_hash
from esopt.export import export_run
from esopt.train.rundir import RunDir
from esopt.algos.es.trainer import Trainer


def weight_reward_rollout(policy, envs, ids, obs, cfg, seed, on_turn=None):
    """A stand-in agent whose reward is a fixed linear function of the weights:
    members differ, so ES makes real (non-zero) updates, deterministically."""
    w = policy.model.model.embed_tokens.weight.detach().reshape(-1)[:512].double()
    direction = torch.linspace(-1, 1, 512, dtype=torch.float64)
    r = float(w @ direction)
    return [Episode(task=i, observation0=o, reward=r, done=True) for i, o in zip(ids, obs)]


def make_trainer(cfg, run=None):
    run = run or RunDir.create(cfg)
    tr = Trainer(cfg, run, log=lambda *a: None)
    tr.rollout_fn = weight_reward_rollout
    return tr


@pytest.mark.parametrize("precision", [[], ["runtime.dtype=bfloat16"],
                                       ["runtime.dtype=bfloat16", "es.update_rounding=stochastic"]],
                         ids=["float32", "bf16-compensated", "bf16-stochastic"])
def test_resume_equivalence(tiny_cfg, precision):
    """A run stopped between generations and resumed reaches the uninterrupted run's weights; in
    bf16 the resumed run rebuilds the compensation buffers (or rounding draws) by replay."""
    full = make_trainer(tiny_cfg("run.name=full", *precision))
    base_hash = weights_hash(full.model)
    full.train()
    want = weights_hash(full.model)
    assert want != base_hash  # updates really happened

    cfg = tiny_cfg("run.name=killed", *precision)
    first = make_trainer(cfg)
    first.evaluate(0)
    first.generation(0)
    first.generation(1)
    run_path = first.run.path
    del first  # "killed" between generations: only the files remain

    run = RunDir(run_path)
    second = make_trainer(run.load_config(), run)
    start = second.resume()
    assert start == 2
    summary = second.train(start)
    assert weights_hash(second.model) == want
    assert summary["weights_hash"] == want
    hist = json.loads((run_path / "history.json").read_text())["generations"]
    assert [r["generation"] for r in hist] == [0, 1, 2]
    assert "base" in summary  # base evaluation recovered from the killed run's files


def test_es_improves_toy_reward(tiny_cfg):
    tr = make_trainer(tiny_cfg("run.name=toy", "es.generations=6", "es.alpha.start=0.05", "es.alpha.end=0.05",
                               "es.sigma.start=0.01", "es.sigma.end=0.01"))
    r0 = weight_reward_rollout(tr.policy, [None], ["x"], ["o"], tr.cfg, 0)[0].reward
    tr.train()
    r1 = weight_reward_rollout(tr.policy, [None], ["x"], ["o"], tr.cfg, 0)[0].reward
    assert r1 > r0 + 0.1


def test_failed_members_never_reach_weights(tiny_cfg):
    tr = make_trainer(tiny_cfg("run.name=fail", "es.generations=1"))
    base = weights_hash(tr.model)

    def broken(*a, **k):
        raise RuntimeError("rollout exploded")

    tr.rollout_fn = broken
    stats = tr.generation(0)
    assert weights_hash(tr.model) == base  # restored every time; all-NaN rewards give no update
    rec = json.loads((tr.run.path / "history.json").read_text())["generations"][0]
    assert rec["nonfinite_rewards"] == 4 and rec["rewards"] == [None] * 4
    assert "rollout exploded" in rec["member_errors"]["0"]
    assert stats["nonfinite_rewards"] == 4


def test_one_failed_member_counts_as_worst(tiny_cfg):
    tr = make_trainer(tiny_cfg("run.name=onefail", "es.generations=1", "es.antithetic=false"))
    calls = {"n": 0}

    def flaky(policy, envs, ids, obs, cfg, seed, on_turn=None):
        calls["n"] += 1
        if calls["n"] == 2:
            raise ValueError("one bad member")
        return weight_reward_rollout(policy, envs, ids, obs, cfg, seed)

    tr.rollout_fn = flaky
    tr.generation(0)
    rec = tr.history.records[0]
    assert rec["rewards"][1] is None and rec["nonfinite_rewards"] == 1
    assert np.all(np.isfinite(rec["coefficients"]))
    assert rec["coefficients"][1] == min(rec["coefficients"])


def test_export_round_trip(tiny_cfg, tmp_path):
    tr = make_trainer(tiny_cfg("run.name=exp", "es.generations=2"))
    tr.train()
    info = export_run(tr.run.path, tmp_path / "exported")
    assert info["weights_hash"] == weights_hash(tr.model)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "exported").eval()
    mine = dict(tr.model.named_parameters())
    for name, p in loaded.named_parameters():
        assert torch.equal(p, mine[name]), name
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, tr.model(ids).logits)


def test_run_folder_contents(tiny_cfg):
    tr = make_trainer(tiny_cfg("run.name=files", "es.generations=2"))
    tr.train()
    p = tr.run.path
    for f in ("config.yaml", "history.json", "metrics.jsonl", "summary.json", "trajectories/gen0000.jsonl",
              "trajectories/eval_gen0000.jsonl", "trajectories/eval_gen0002.jsonl"):
        assert (p / f).exists(), f
    rec = json.loads((p / "history.json").read_text())["generations"][1]
    for k in ("seeds", "signs", "rewards", "shaped", "sigma", "alpha", "weights_hash"):
        assert k in rec
    kinds = [m["kind"] for m in tr.run.metrics()]
    assert kinds.count("train") == 2 and kinds.count("eval") == 2
    assert list((p / "tb").glob("events.*"))
    with pytest.raises(FileExistsError):
        RunDir.create(tr.cfg)


def forward_reward_rollout(policy, envs, ids, obs, cfg, seed, on_turn=None, rows=None):
    """Reward from a forward pass of each episode's row: works for side-term (low-rank) members."""
    tokens = torch.arange(3, 13).view(1, -1)
    out = []
    for i, (task, o) in enumerate(zip(ids, obs)):
        with torch.no_grad(), rows.context([i]):
            r = float(policy.model(tokens).logits[0, -1, :16].sum())
        out.append(Episode(task=task, observation0=o, reward=r, done=True))
    return out


@pytest.mark.parametrize("others", ["frozen", "full"])
def test_lowrank_training_resume_and_export(tiny_cfg, tmp_path, others):
    extra = ("es.noise=lowrank", "es.rank=2", "es.sigma.start=0.05", "es.sigma.end=0.05", f"es.lowrank_others={others}")
    full = make_trainer(tiny_cfg("run.name=lr-full", *extra))
    norm0 = full.model.model.norm.weight.detach().clone()
    full.rollout_fn = forward_reward_rollout
    base = weights_hash(full.model)
    full.train()
    want = weights_hash(full.model)
    assert want != base
    rec = full.history.records[0]
    assert len(set(r for r in rec["rewards"])) == len(rec["rewards"])  # members really differ
    assert torch.equal(full.model.model.norm.weight, norm0) == (others == "frozen")  # norms train only with "full"

    first = make_trainer(tiny_cfg("run.name=lr-killed", *extra))
    first.rollout_fn = forward_reward_rollout
    first.generation(0)
    run = RunDir(first.run.path)
    second = make_trainer(run.load_config(), run)
    second.rollout_fn = forward_reward_rollout
    second.train(second.resume())
    assert weights_hash(second.model) == want
    assert export_run(full.run.path, tmp_path / "lr-export")["weights_hash"] == want


def test_lowrank_real_rollout_smoke(tiny_cfg):
    tr = Trainer(tiny_cfg("run.name=lr-real", "es.noise=lowrank", "es.generations=1"), RunDir.create(
        tiny_cfg("run.name=lr-real", "es.noise=lowrank", "es.generations=1")), log=lambda *a: None)
    stats = tr.generation(0)
    assert stats["nonfinite_rewards"] == 0
    traj = tr.run.read_trajectories("gen0000")
    assert len(traj) == 4 * 3 and {t["member"] for t in traj} == {0, 1, 2, 3}


def test_resume_refuses_another_base_model(tiny_cfg):
    first = make_trainer(tiny_cfg("run.name=wrongbase", "es.generations=2"))
    first.generation(0)
    run = RunDir(first.run.path)
    second = make_trainer(run.load_config(), run)
    with torch.no_grad():
        next(second.model.parameters()).view(-1)[0] += 1.0
    with pytest.raises(RuntimeError, match="not the base model"):
        second.resume()


@pytest.mark.parametrize("noise", ["table", "lowrank"])
def test_full_history_generation_same_with_kv_reuse(tiny_cfg, noise):
    """One real ES generation with full history: the members' episodes and the update are
    the same whether each rollout keeps its episodes' keys/values across turns or not."""
    runs = {}
    for reuse in ("off", "auto"):
        cfg = tiny_cfg(f"run.name=kv-{reuse}", f"es.noise={noise}", "es.generations=1", "agent.history=full",
                       f"agent.kv_reuse={reuse}", "env.blanks=3", "env.max_turns=3")
        tr = Trainer(cfg, RunDir.create(cfg), log=lambda *a: None)
        tr.generation(0)
        runs[reuse] = ([(t["member"], [x["response"] for x in t["turns"]]) for t in tr.run.read_trajectories("gen0000")],
                       weights_hash(tr.model))
    assert runs["auto"] == runs["off"]
    assert max(len(r) for _, r in runs["off"][0]) == 3  # multi-turn episodes (the test can fail)


def test_the_kernels_one_off_load_is_its_own_phase(tiny_cfg):
    """Table noise runs fused numba kernels: their load (or compile) is timed apart, once per process,
    not counted as the first member's perturbation (the report shows it as its own phase)."""
    from esopt.algos.es.trainer import Trainer
    from esopt.train.rundir import RunDir

    cfg = tiny_cfg("run.name=kernels", "es.noise=table", "es.table_size=4194304")
    tr = Trainer(cfg, RunDir.create(cfg), log=lambda *a: None)
    first, second = tr.generation(0), tr.generation(1)
    assert first["time_kernels"] > 0 and "time_kernels" not in second
