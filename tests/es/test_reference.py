"""es/reference.py as an oracle: the real trainer's generations, replayed by the plain reference
on an identical copy of the starting model, give the same seeds, signs, rewards and coefficients,
and the same weights bit for bit (weights_hash)."""
import subprocess
import sys

import pytest
import torch
from conftest import tiny_llama

from esopt.agent.rollout import Episode
from esopt.es.perturb import weights_hash
from esopt.algos.es.trainer import Trainer
from esopt.es.reference import reference_generation
from esopt.train.rundir import RunDir

PROBE = torch.arange(3, 13).view(1, -1)


def reward(model) -> float:
    """Deterministic and dependent on every weight: a forward pass of a fixed prompt."""
    with torch.no_grad():
        return float(model(PROBE).logits[0, -1, :16].sum())


def probe_rollout(policy, envs, ids, obs, cfg, seed, on_turn=None, rows=None, context=None):
    """The whole rollout replaced: each episode's reward is `reward` of the member's weights."""
    r = reward(policy.model)
    return [Episode(task=i, observation0=o, reward=r, done=True) for i, o in zip(ids, obs)]


def train(cfg, generations: int, vocab: int = 256) -> Trainer:
    tr = Trainer(cfg, RunDir.create(cfg), model=tiny_llama(vocab=vocab), tokenizer=None, log=lambda *a: None)
    tr.rollout_fn = probe_rollout
    for t in range(generations):
        tr.generation(t)
    return tr


def replay(cfg, records, sigma_factor: float = 1.0, vocab: int = 256):
    """The reference, generation by generation, on a fresh copy of the starting model."""
    model = tiny_llama(vocab=vocab)
    got = [reference_generation(model, reward, run_seed=cfg.run.seed, generation=rec["generation"],
                                population=rec["population"], sigma=rec["sigma"] * sigma_factor, alpha=rec["alpha"],
                                antithetic=cfg.es.antithetic, shaping=cfg.es.shaping, scope=cfg.es.scope)
           for rec in records]
    return model, got


SETTINGS = {  # (overrides, vocabulary size)
    "antithetic-zscore": ([], 256),
    "plain-rank-linear": (["es.antithetic=false", "es.population=3", "es.shaping=centered_rank",
                           "es.scope=all_linear"], 256),
    # an embedding of 16400 x 64 > CHUNK floats: its noise streams span two chunks
    "two-chunks": (["es.shaping=none"], 16400),
}


@pytest.mark.parametrize("extra,vocab", SETTINGS.values(), ids=SETTINGS.keys())
def test_reference_matches_trainer(tiny_cfg, extra, vocab):
    cfg = tiny_cfg("run.name=ref", "run.seed=7", "es.noise=gaussian", "runtime.dtype=float32",
                   "es.episodes_per_member=1", "es.generations=2", "es.alpha.start=0.05", "es.alpha.end=0.05", *extra)
    tr = train(cfg, 2, vocab)
    records = tr.history.records
    assert [r["generation"] for r in records] == [0, 1] and records[0]["sigma"] != records[1]["sigma"]

    model, got = replay(cfg, records, vocab=vocab)
    assert weights_hash(tiny_llama(vocab=vocab)) == tr.history.meta["base_weights_hash"]  # the same starting weights
    for rec, ref in zip(records, got):
        for key in ("seeds", "signs", "rewards", "shaped", "coefficients", "population"):
            assert ref[key] == rec[key], key
        assert len(set(ref["rewards"])) > 1  # members really differ, so the update is not zero
    assert weights_hash(model) == records[-1]["weights_hash"] == weights_hash(tr.model)
    assert weights_hash(model) != tr.history.meta["base_weights_hash"]


def test_reference_can_fail(tiny_cfg):
    """The oracle is sharp: a slightly different sigma gives other rewards and other weights."""
    cfg = tiny_cfg("run.name=ref", "es.noise=gaussian", "es.episodes_per_member=1", "es.generations=1")
    records = train(cfg, 1).history.records
    model, got = replay(cfg, records, sigma_factor=1.001)
    assert got[0]["seeds"] == records[0]["seeds"]
    assert got[0]["rewards"] != records[0]["rewards"]
    assert weights_hash(model) != records[0]["weights_hash"]


def test_reference_imports_only_es():
    """Independent of the code it checks: importing it loads nothing of esopt outside esopt.es."""
    code = ("import sys, esopt.es.reference; "
            "print(sorted(m for m in sys.modules if m.startswith('esopt.') and not m.startswith('esopt.es')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
