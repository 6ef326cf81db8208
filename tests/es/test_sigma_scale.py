"""es.sigma_scale=rms (es/scales.py): each tensor's noise and update are sigma (alpha) x its RMS x
sqrt(tensors in the model / tensors in scope); restore stays bit-exact, low-rank side terms follow
the same rule, and the default (none) is today's ES bit for bit."""
import math

import pytest
import torch
from torch import nn

from esopt.es.lowrank import LowRankPerturber
from esopt.es.noise import GaussianNoise, TableNoise
from esopt.es.perturb import Perturber, select_parameters, weights_hash
from esopt.es.scales import tensor_scales


class Mixed(nn.Module):
    """Tensors of very different sizes: a gain near 1, weights near 0.02, a zero bias."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.gain = nn.Parameter(1.0 + 0.01 * torch.randn(1024, generator=g), requires_grad=False)
        self.w = nn.Parameter(0.02 * torch.randn(32, 32, generator=g), requires_grad=False)
        self.v = nn.Parameter(0.2 * torch.randn(32, 32, generator=g), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(32), requires_grad=False)


def rms(t):
    return float(t.double().pow(2).mean().sqrt())


def test_rms_scales_are_each_tensors_rms_with_a_floor_for_zeros():
    m = Mixed()
    named = select_parameters(m, "full")
    s = tensor_scales(named, "rms", len(named))
    for name, p in named:
        if name != "bias":
            assert s[name] == pytest.approx(rms(p), rel=5e-3), name  # 3 significant digits
    med = sorted(rms(p) for _, p in named)[len(named) // 2 - 1: len(named) // 2 + 1]
    assert s["bias"] == pytest.approx(0.01 * sum(med) / 2, rel=1e-2)  # 1% of the median: a zero bias still moves
    assert tensor_scales(named, "none", len(named)) == {n: 1.0 for n, _ in named}
    with pytest.raises(ValueError, match="sigma_scale"):
        tensor_scales(named, "bogus", 4)


def test_a_smaller_scope_gets_the_square_root_of_its_share():
    m = Mixed()
    full = tensor_scales(select_parameters(m, "full"), "rms", 4)
    one = tensor_scales(select_parameters(m, ["w"]), "rms", 4)
    assert one["w"] == pytest.approx(full["w"] * 2, rel=1e-2)  # 1 of 4 tensors: sqrt(4)


@pytest.mark.parametrize("noise", ["gaussian", "table"])
def test_rms_perturbation_is_sigma_times_each_tensors_scale_and_restores_exactly(noise):
    src = (lambda: GaussianNoise()) if noise == "gaussian" else (lambda: TableNoise(1 << 22))
    m, ref = Mixed(), Mixed()
    scaled, plain = Perturber(m, noise=src(), sigma_scale="rms"), Perturber(ref, noise=src())
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    h = weights_hash(m)
    sigma = 0.05
    with scaled.perturbed(7, sigma, -1):
        for name, p in m.named_parameters():
            with plain.perturbed(7, sigma * scaled.scales[name], -1):  # the same noise at that tensor's sigma
                assert torch.allclose(p, dict(ref.named_parameters())[name], atol=1e-7), name
            moved = rms(p - before[name]) / rms(before[name]) if name != "bias" else None
            if moved is not None:
                assert moved == pytest.approx(sigma, rel=0.15), name  # relative to the tensor's own size
    assert weights_hash(m) == h
    for _ in range(50):
        with scaled.perturbed(3, 0.3):
            pass
    assert weights_hash(m) == h  # bit-exact restore under per-tensor scales too


def test_rms_update_moves_each_tensor_by_alpha_times_its_scale():
    m, ref = Mixed(), Mixed()
    scaled, plain = Perturber(m, sigma_scale="rms"), Perturber(ref)
    seeds, coefs = [4, 4, 9, 9], [1.0, -1.0, 0.5, -0.5]
    before = {n: p.detach().clone() for n, p in ref.named_parameters()}
    scaled.apply_update(seeds, coefs, 0.01, 4)
    plain.apply_update(seeds, coefs, 0.01, 4)
    for name, p in m.named_parameters():
        unit = dict(ref.named_parameters())[name] - before[name]
        assert torch.allclose(p - before[name], unit * scaled.scales[name], atol=1e-7), name
    assert scaled.describe()["sigma_scale"]["rule"] == "rms" and "sigma_scale" not in plain.describe()


def test_lowrank_side_terms_and_update_use_the_scales(tiny_model):
    lr = LowRankPerturber(tiny_model, rank=1, sigma_scale="rms")
    ids = torch.randint(0, 200, (2, 6))
    with torch.no_grad(), lr.side_terms([5], [0.03], torch.tensor([0, 0])):
        side = tiny_model(ids).logits
    before = {n: m.weight.detach().clone() for n, m in lr.linears}
    with torch.no_grad():
        for (name, mod), s in zip(lr.linears, lr.scales):
            mod.weight.add_(0.03 * s * lr.delta(5, name, mod))
        merged = tiny_model(ids).logits
        for name, mod in lr.linears:
            mod.weight.copy_(before[name])
    assert torch.allclose(side, merged, atol=1e-4)
    ratio = [s / rms(mod.weight) for (_, mod), s in zip(lr.linears, lr.scales)]
    share = math.sqrt(len(list(tiny_model.parameters())) / len(lr.linears))
    assert all(r == pytest.approx(share, rel=1e-2) for r in ratio)
    lr.apply_update([5, 5], [1.0, -0.5], 0.01, 2)
    for (name, mod), s in zip(lr.linears, lr.scales):
        want = before[name] + 0.01 / 2 * 0.5 * s * lr.delta(5, name, mod)
        assert torch.allclose(mod.weight, want, atol=1e-6), name


def test_an_rms_run_replays_to_the_same_weights(tiny_cfg):
    """The scales come from the base weights: a resumed run's replay reaches the trained weights."""
    from esopt.algos.es.trainer import Trainer
    from esopt.train.rundir import RunDir

    task = ["env.id=vowels", "es.sigma.start=0.05", "es.sigma.end=0.05", "es.alpha.start=0.25", "es.alpha.end=0.25"]
    cfg = tiny_cfg(*task, "es.sigma_scale=rms", "run.name=rms")
    tr = Trainer(cfg, RunDir.create(cfg), log=lambda *a: None)
    summary = tr.train()
    again = Trainer(cfg, RunDir(tr.run.path), log=lambda *a: None)
    assert again.resume() == 3 and weights_hash(again.model) == summary["weights_hash"]
    assert summary["weights_hash"] != again.history.meta["base_weights_hash"]  # it learned something
    plain = tiny_cfg(*task, "run.name=plain")
    other = Trainer(plain, RunDir.create(plain), log=lambda *a: None).train()
    assert other["weights_hash"] != summary["weights_hash"]  # the rule changes what the run does
