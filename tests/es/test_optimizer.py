"""es.optimizer (es/optim.py): momentum and Adam on the ES noise sum, their state rebuilt by replay."""
import json

import pytest
import torch
from torch import nn

from esopt.cli import main
from esopt.es.history import History
from esopt.es.optim import Adam, Momentum
from esopt.es.perturb import Perturber, weights_hash
from esopt.train.rundir import RunDir

from conftest import TINY_OVERRIDES


def _model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(40, 30), nn.Linear(30, 5))


def _sums(pert, seeds, coefs):
    """The per-tensor noise sums acc = sum_i c_i eps_i, as the update draws them."""
    out = {}
    for name, p in pert.params:
        acc = torch.zeros(p.numel())
        for s, c in zip(seeds, coefs):
            acc += pert.noise.stream(s, name, p.numel()).next_chunk() * c
        out[name] = acc
    return out


UPDATES = [([11, 12], [0.7, -0.3]), ([13, 14], [-0.2, 0.9]), ([15, 16], [0.5, 0.4])]


def test_momentum_follows_its_formula_and_its_first_step_is_sgds():
    sgd, mom = Perturber(_model(), "full"), Perturber(_model(), "full", rule=Momentum(0.9))
    w0 = {n: p.detach().clone() for n, p in mom.params}
    sgd.apply_update(*UPDATES[0], 0.01, 4)
    mom.apply_update(*UPDATES[0], 0.01, 4)
    assert weights_hash(sgd.model) == weights_hash(mom.model)  # v = 0.9 * 0 + acc: sgd's bits
    mom.apply_update(*UPDATES[1], 0.01, 4)
    a1, a2 = _sums(mom, *UPDATES[0]), _sums(mom, *UPDATES[1])
    for name, p in mom.params:
        v2 = 0.9 * a1[name] + a2[name]
        want = w0[name].view(-1) + 0.01 / 4 * (a1[name] + v2)
        torch.testing.assert_close(p.detach().view(-1), want, rtol=0, atol=1e-6)
    assert mom.rule.state_bytes() == 4 * sum(p.numel() for _, p in mom.params)  # one float32 copy


def test_adam_follows_its_formula():
    pert = Perturber(_model(), "full", rule=Adam(0.9, 0.999, 1e-8))
    w = {n: p.detach().clone().view(-1).double() for n, p in pert.params}
    m = {n: torch.zeros_like(x) for n, x in w.items()}
    v = {n: torch.zeros_like(x) for n, x in w.items()}
    for k, (seeds, coefs) in enumerate(UPDATES, start=1):
        acc = _sums(pert, seeds, coefs)
        pert.apply_update(seeds, coefs, 1e-3, 4)
        for name in w:
            g = acc[name].double() / 4
            m[name] = 0.9 * m[name] + 0.1 * g
            v[name] = 0.999 * v[name] + 0.001 * g * g
            w[name] += 1e-3 * (m[name] / (1 - 0.9 ** k)) / ((v[name] / (1 - 0.999 ** k)).sqrt() + 1e-8)
    for name, p in pert.params:
        torch.testing.assert_close(p.detach().view(-1).double(), w[name], rtol=0, atol=1e-6)
    assert pert.rule.state_bytes() == 8 * sum(p.numel() for _, p in pert.params)  # two float32 copies
    assert all(st["steps"] == 3 for st in pert.rule.state.values())


def test_a_generation_that_moves_nothing_leaves_the_state():
    pert = Perturber(_model(), "full", rule=Adam())
    pert.apply_update(*UPDATES[0], 1e-3, 4)
    before = weights_hash(pert.model), {n: [b.clone() for b in st["bufs"]] for n, st in pert.rule.state.items()}
    pert.apply_update([1, 2], [0.0, 0.0], 1e-3, 4)  # every member scored alike
    pert.apply_update(*UPDATES[1], 0.0, 4)  # alpha 0
    assert weights_hash(pert.model) == before[0]
    assert all(st["steps"] == 1 and all(torch.equal(a, b) for a, b in zip(st["bufs"], before[1][n]))
               for n, st in pert.rule.state.items())


@pytest.mark.parametrize("rule", ["momentum", "adam"])
def test_replay_rebuilds_the_state_and_another_optimizer_does_not(tmp_path, rule):
    """History.replay onto a fresh perturber with the run's optimizer gives the live weights (the
    state rebuilt on the way); replaying the same history with sgd does not."""
    make = (lambda: Momentum(0.9)) if rule == "momentum" else (lambda: Adam())
    live = Perturber(_model(), "full", rule=make())
    hist = History(tmp_path / "h.json", meta={"base_weights_hash": weights_hash(live.model)})
    for t, (seeds, coefs) in enumerate(UPDATES):
        live.apply_update(seeds, coefs, 1e-3, 4)
        hist.records.append({"generation": t, "seeds": seeds, "coefficients": coefs, "alpha": 1e-3, "population": 4,
                             "weights_hash": weights_hash(live.model)})
    assert History(hist.path, hist.records, hist.meta).replay(Perturber(_model(), "full", rule=make())) == 3
    with pytest.raises(RuntimeError, match="replaying 3 generations gave weights hash"):
        hist.replay(Perturber(_model(), "full"))


# ------------------------------------------------------------------ through the trainer
def weight_reward(policy, envs, ids, obs, cfg, seed, on_turn=None, rows=None):
    """A stand-in agent whose reward is a fixed function of the weights, so members differ: a linear
    one of the embeddings (in-place members), or a forward pass of each row (low-rank side terms)."""
    from esopt.agent.rollout import Episode

    if rows is None:
        w = policy.model.model.embed_tokens.weight.detach().reshape(-1)[:512].double()
        r = [float(w @ torch.linspace(-1, 1, 512, dtype=torch.float64))] * len(ids)
    else:
        r = []
        for i in range(len(ids)):
            with torch.no_grad(), rows.context([i]):
                r.append(float(policy.model(torch.arange(3, 13).view(1, -1)).logits[0, -1, :16].sum()))
    return [Episode(task=i, observation0=o, reward=x, done=True) for i, o, x in zip(ids, obs, r)]


def _trainer(cfg, run=None):
    from esopt.algos.es.trainer import Trainer

    tr = Trainer(cfg, run or RunDir.create(cfg), log=lambda *a: None)
    tr.rollout_fn = weight_reward
    return tr


@pytest.mark.parametrize("extra", [
    ["es.optimizer=momentum"],
    ["es.optimizer=adam", "es.alpha.start=2e-4", "es.alpha.end=2e-4"],
    ["es.optimizer=adam", "es.noise=lowrank", "es.lowrank_others=full", "es.sigma.start=0.05", "es.sigma.end=0.05"],
    ["es.optimizer=momentum", "runtime.dtype=bfloat16", "es.sigma_scale=rms"],
], ids=["momentum", "adam", "adam-lowrank-others", "momentum-bf16-rms"])
def test_resume_with_an_optimizer_is_bit_exact(tiny_cfg, extra):
    """Stopped after 1 and after 2 of 3 generations, then resumed: the uninterrupted run's weights, bit
    for bit (the optimizer's state rebuilt by replaying the history); and not sgd's weights."""
    full = _trainer(tiny_cfg("run.name=full", *extra))
    full.train()
    want = weights_hash(full.model)
    plain = _trainer(tiny_cfg("run.name=sgd", *[e for e in extra if not e.startswith("es.optimizer")]))
    plain.train()
    assert weights_hash(plain.model) != want  # the optimizer changed the steps
    assert full.history.meta["settings"]["es.optimizer"] == extra[0].split("=")[1]
    for stop in (1, 2):
        first = _trainer(tiny_cfg(f"run.name=stopped{stop}", *extra))
        for t in range(stop):
            first.generation(t)
        run = RunDir(first.run.path)
        del first
        second = _trainer(run.load_config(), run)
        assert second.resume() == stop
        second.train(stop)
        assert weights_hash(second.model) == want


def test_cli_trains_with_adam_and_records_it(esopt_cache, tmp_path, capsys):
    args = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=2", "es.optimizer=adam",
            "es.adam.beta2=0.99", f"run.out_dir={tmp_path}", "run.name=adam"]
    assert main(args) == 0
    run = tmp_path / "adam"
    settings = json.loads((run / "history.json").read_text())["meta"]["settings"]
    assert settings["es.optimizer"] == "adam" and settings["es.adam"] == {"beta1": 0.9, "beta2": 0.99, "eps": 1e-8}
    assert "es.momentum" not in settings  # an optimizer's settings only where it is used (sgd records none)
    assert "optimizer: adam" in (run / "config.yaml").read_text()
    capsys.readouterr()
    # the optimizer cannot change on resume (the history replays with it)
    assert main(["train", "--resume", str(run), "es.optimizer=sgd", "es.generations=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert "es.optimizer cannot change on resume" in err and len(err.splitlines()) == 1
    assert main(["train", "--resume", str(run), "es.generations=3"]) == 0  # replays with adam, hash-verified


@pytest.mark.parametrize("override,needle", [
    ("es.optimizer=nesterov", "bad value for 'es.optimizer': 'nesterov'"),
    ("es.momentum=1", "bad value for 'es.momentum': 1"),
    ("es.adam.beta3=0.5", "unknown config key 'es.adam.beta3'"),
])
def test_bad_optimizer_settings_are_one_line(override, needle, capsys):
    assert main(["train", "configs/demo.yaml", override]) != 0
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1
