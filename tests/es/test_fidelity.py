"""Fidelity of the ES core in every dtype: restore of every bit pattern, updates that survive
bf16/fp16 (stochastic rounding), and noise streams that never coincide within a generation."""
import numpy as np
import pytest
import torch
from torch import nn

import esopt.es.noise as noise_mod
from esopt.es import kernels
from esopt.es.lowrank import LowRankPerturber
from esopt.es.noise import GaussianNoise, stream_key, tensor_seed
from esopt.es.perturb import Perturber, weights_hash
from esopt.es.rounding import precision_check, precision_warnings, stochastic_round, uniforms
from esopt.es.strategy import Strategy, member_seed

CYCLES = 1000  # docs/method.md quotes this number
SIGMAS = (1e-4, 4e-3, 1e-1)


def awkward_values(dtype: torch.dtype, n: int = 1536, seed: int = 0) -> torch.Tensor:
    """Ordinary weights plus the bit patterns a float != gets wrong or that lose low bits:
    -0.0 and +0.0, subnormals of both signs, the smallest normals, and large finite values."""
    g = torch.Generator().manual_seed(seed)
    fi = torch.finfo(dtype)
    w = (torch.randn(n, generator=g) * 0.05).to(dtype)
    special = torch.tensor([-0.0, 0.0, -0.0, fi.tiny, -fi.tiny, fi.tiny / 8, -fi.tiny / 8, fi.tiny / 2 ** 6,
                            fi.max / 4, -fi.max / 4, fi.max / 3, 1.0, -1.0, 1e-8, -1e-8], dtype=torch.float32)
    w[: special.numel()] = special.to(dtype)
    w[-64:] = -0.0
    return w


class Awkward(nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.lin = nn.Linear(48, 32).to(dtype)
        self.lin.weight.data.copy_(awkward_values(dtype, 48 * 32, 1).view(32, 48))
        self.lin.bias.data.copy_(awkward_values(dtype, 32, 2))
        self.scale = nn.Parameter(awkward_values(dtype, 1536, 3), requires_grad=False)
        self.requires_grad_(False)


def bits(model):
    return {n: p.detach().clone().reshape(-1).view(torch.uint8) for n, p in model.named_parameters()}


def assert_bits_equal(model, snap, where):
    for n, p in model.named_parameters():
        assert torch.equal(p.detach().reshape(-1).view(torch.uint8), snap[n]), f"{n} not restored bit-exactly ({where})"


def test_negative_zero_is_restored_as_negative_zero():
    """The old restore found lost elements with a float != and gave back +0.0 for -0.0."""
    w = torch.full((1000,), -0.0)
    model = nn.Module()
    model.w = nn.Parameter(w, requires_grad=False)
    for fused in (False, True):
        pert = Perturber(model, fused=fused)
        with pert.perturbed(seed=1, sigma=1e-3):
            assert (model.w != 0).all()
        assert torch.equal(model.w.view(torch.int32), torch.full((1000,), -0.0).view(torch.int32)), f"fused={fused}"


PATHS = [("float32", True), ("float32", False), ("bfloat16", False), ("float16", False)]


@pytest.mark.parametrize("dtype,fused", PATHS, ids=[f"{d}-{'numba' if f else 'torch'}" for d, f in PATHS])
def test_restore_every_bit_pattern_1000_cycles(dtype, fused):
    dt = getattr(torch, dtype)
    if fused and not kernels.available(torch.zeros(1)):
        pytest.skip("numba not installed")
    model = Awkward(dt)
    pert = Perturber(model, fused=fused)
    snap = bits(model)
    changed = lost = 0
    for i in range(CYCLES):
        scale = SIGMAS[i % len(SIGMAS)] * (1 if i % 2 else -1)
        corr = pert.perturb(seed=i, scale=scale)
        changed += int((model.scale.reshape(-1).view(torch.uint8) != snap["scale"]).any())
        lost += sum(c.index.numel() for c in corr)
        pert.restore(seed=i, scale=scale, corrections=corr)
        assert_bits_equal(model, snap, f"cycle {i}, scale {scale}")
    assert changed == CYCLES and lost > CYCLES  # every perturbation moved weights; restore needed corrections


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_lowrank_full_mode_restores_every_bit_pattern_1000_cycles(dtype):
    model = Awkward(getattr(torch, dtype))
    lr = LowRankPerturber(model, rank=1, scope="full", others="full", others_noise=GaussianNoise())
    assert sorted(n for n, _ in lr.others.params) == ["lin.bias", "scale"]
    snap = bits(model)
    for i in range(CYCLES):
        sigma = SIGMAS[i % len(SIGMAS)]
        with lr.others_perturbed(i, sigma, 1 if i % 2 else -1):
            pass
        assert_bits_equal(model, snap, f"cycle {i}")


# ----------------------------------------------------------------------------- rounding


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_stochastic_round_is_unbiased_and_lands_on_neighbours(dtype):
    lo = torch.tensor(1.0, dtype=dtype)
    hi = torch.nextafter(lo, torch.tensor(2.0, dtype=dtype))
    target = torch.full((200_000,), float(lo) + 0.3 * (float(hi) - float(lo)))
    out = stochastic_round(target, dtype, uniforms(123, target.numel()))
    assert set(out.float().unique().tolist()) == {float(lo), float(hi)}
    assert float((out == hi).float().mean()) == pytest.approx(0.3, abs=0.005)
    exact = torch.tensor([0.5, -0.0, 3.0])  # representable values stay exactly as they are
    assert torch.equal(stochastic_round(exact, dtype, torch.zeros(3)).view(torch.int16), exact.to(dtype).view(torch.int16))


class Weights(nn.Module):
    def __init__(self, dtype):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = nn.Parameter((torch.randn(20_000, generator=g) * 0.05).to(dtype), requires_grad=False)
        self.norm = nn.Parameter(torch.ones(4_000, dtype=dtype), requires_grad=False)  # like RMSNorm weights


def realised_vs_intended(dtype, rounding, generations=20, alpha=5e-4, population=32):
    """(relative error, bias) of the realised update against the same updates summed in float64,
    and the floor: the relative error of the float64 result rounded once to the dtype."""
    model = Weights(dtype)
    start = {n: p.detach().double().clone() for n, p in model.named_parameters()}
    pert = Perturber(model, rounding=rounding)
    intended = {n: torch.zeros_like(v) for n, v in start.items()}
    rng = np.random.default_rng(0)
    for t in range(generations):
        seeds = [int(s) for s in rng.integers(0, 2 ** 62, population // 2)]
        coefs = rng.standard_normal(population // 2)
        pert.apply_update(seeds, coefs, alpha, population)
        for n, v in intended.items():
            for s, c in zip(seeds, coefs):
                v += alpha / population * c * noise_mod.tensor_noise(s, n, v.numel()).double()
    real = torch.cat([(p.detach().double() - start[n]) for n, p in model.named_parameters()])
    want = torch.cat(list(intended.values()))
    best = torch.cat([(start[n] + intended[n]).to(dtype).double() - start[n] for n in start])
    rel = float((real - want).norm() / want.norm())
    bias = float(real @ want / (want @ want)) - 1.0
    floor = float((best - want).norm() / want.norm())
    return rel, bias, floor


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_updates_are_not_rounded_away(dtype):
    rel_c, bias_c, floor = realised_vs_intended(dtype, "compensated")
    rel_sr, bias_sr, _ = realised_vs_intended(dtype, "stochastic")
    rel_rn, bias_rn, _ = realised_vs_intended(dtype, "nearest")
    # compensated (the default) ends as close to the exact sum as the dtype allows: rounding it once
    assert rel_c <= floor * 1.02 + 1e-3, (rel_c, floor)
    assert rel_rn > 1.3 * floor and bias_rn < -0.1  # round-to-nearest (the old behaviour) loses part of it
    assert abs(bias_sr) < 0.05  # stochastic rounding is unbiased ...
    assert rel_sr > rel_c  # ... but noisier than compensation for updates this far below an ulp


def test_float32_update_unchanged_by_the_rounding_setting():
    a, b = Weights(torch.float32), Weights(torch.float32)
    Perturber(a, rounding="stochastic").apply_update([1, 2], [0.5, -1.0], 1e-2, 4)
    Perturber(b, rounding="nearest").apply_update([1, 2], [0.5, -1.0], 1e-2, 4)
    assert weights_hash(a) == weights_hash(b)


@pytest.mark.parametrize("rounding", ["compensated", "stochastic"])
def test_low_precision_updates_replay_bit_for_bit(rounding):
    """Replay (resume, export) redoes the same updates: same seeds, same bits."""
    runs = []
    for _ in range(2):
        model = Weights(torch.bfloat16)
        pert = Perturber(model, rounding=rounding)
        for t in range(3):
            pert.apply_update([10 + t, 20 + t], [1.0, -0.5], 5e-4, 4)
        runs.append(weights_hash(model))
    assert runs[0] == runs[1]
    other = Weights(torch.bfloat16)
    Perturber(other, rounding=rounding).apply_update([11, 21], [1.0, -0.5], 5e-4, 4)
    assert weights_hash(other) != runs[0]


def test_precision_warning_when_sigma_is_rounded_away():
    fp32, bf16 = Weights(torch.float32), Weights(torch.bfloat16)
    assert precision_check(list(fp32.named_parameters()), 7e-4, 5e-4, 32, "stochastic") == {}
    check = precision_check(list(bf16.named_parameters()), 1e-5, 5e-4, 32, "nearest")
    assert check["perturbed_share"] < 0.5 and check["update_changed_share_nearest"] < 0.5
    lines = precision_warnings(check, "bfloat16", 1e-5, 5e-4)
    assert len(lines) == 2 and "sigma 1e-05" in lines[0] and "update_rounding" in lines[1]
    ok = precision_check(list(bf16.named_parameters()), 5e-2, 5e-4, 32, "stochastic")
    assert precision_warnings(ok, "bfloat16", 5e-2, 5e-4) == []
    # es.sigma_scale=rms: sigma is relative, each tensor's scale multiplies it (a relative 1e-5 on
    # tensors scaled 5000x is 5e-2 in the weights: fine, not the 1e-5 the global check would see)
    scaled = {name: 5000.0 for name, _ in bf16.named_parameters()}
    ok = precision_check(list(bf16.named_parameters()), 1e-5, 1e-5, 32, "nearest", scales=scaled)
    assert precision_warnings(ok, "bfloat16", 1e-5, 1e-5) == [], ok


# ------------------------------------------------------------------------- noise streams


def test_torch_generator_keeps_only_32_bits_of_a_seed():
    """Why streams are keyed with 32 bits openly: seeds differing above bit 31 give the same noise."""
    s = tensor_seed(5, "w")
    a = torch.randn(8, generator=torch.Generator().manual_seed(s))
    b = torch.randn(8, generator=torch.Generator().manual_seed(s ^ (1 << 40)))
    assert torch.equal(a, b)
    assert stream_key(5, "w") == s & 0xFFFFFFFF


def test_strategy_redraws_seeds_whose_streams_collide(monkeypatch):
    # a 4-bit key space forces collisions between 2 members x 3 tensors of one generation
    monkeypatch.setattr(noise_mod, "stream_key", lambda seed, name: tensor_seed(seed, name) & 0xF)
    names = ["a", "b", "c"]

    def keys(seed):
        return [noise_mod.stream_key(seed, n) for n in names]

    strat = Strategy(4, seed=3)
    redrawn = 0
    for gen in range(20):
        members = strat.ask(gen, keys)
        assert members == strat.ask(gen, keys)  # deterministic
        seeds = sorted({m.seed for m in members})
        all_keys = [k for s in seeds for k in keys(s)]
        assert len(all_keys) == len(set(all_keys)), f"generation {gen} has streams sharing noise"
        redrawn += sum(m.seed != member_seed(3, gen, m.index // 2) for m in members)
        plain = {m.seed for m in strat.ask(gen)}  # without the check, collisions do happen
    assert redrawn > 0
    with pytest.raises(RuntimeError, match="stream key space"):
        Strategy(4, seed=0).ask(0, lambda s: [tensor_seed(s, n) & 1 for n in names])


def test_perturbers_report_their_stream_keys(tiny_model):
    p = Perturber(tiny_model)
    assert p.stream_keys(7) == [stream_key(7, n) for n, _ in p.params]
    assert Perturber(tiny_model, noise=noise_mod.TableNoise(1 << 22)).stream_keys(7) == []
    lr = LowRankPerturber(tiny_model, rank=1, scope="full", others="full", others_noise=GaussianNoise())
    assert len(lr.stream_keys(7)) == len(lr.linears) + len(lr.others.params)


def test_trainer_warns_at_startup_when_bf16_rounds_sigma_away(tiny_cfg):
    from esopt.train.rundir import RunDir
    from esopt.algos.es.trainer import Trainer

    logged = []
    cfg = tiny_cfg("runtime.dtype=bfloat16", "es.sigma.start=1e-6", "es.sigma.end=1e-6", "run.name=warn")
    Trainer(cfg, RunDir.create(cfg), log=logged.append)
    assert any("sigma 1e-06 changes only" in line for line in logged), logged
    logged.clear()
    cfg32 = tiny_cfg("es.sigma.start=1e-6", "es.sigma.end=1e-6", "run.name=warn32")
    Trainer(cfg32, RunDir.create(cfg32), log=logged.append)
    assert not any("warning" in line for line in logged)
