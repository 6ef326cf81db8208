import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from esopt.es.noise import CHUNK, tensor_noise, tensor_seed
from esopt.es.perturb import Perturber, select_parameters, weights_hash


class Toy(nn.Module):
    """Same-shape tensors (the classic correlated-noise trap), tiny weights, a big tensor spanning chunks."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.a = nn.Parameter(torch.randn(64, 64, generator=g) * 0.05, requires_grad=False)
        self.b = nn.Parameter(torch.randn(64, 64, generator=g) * 0.05, requires_grad=False)
        tiny = torch.randn(5000, generator=g) * 1e-6  # low bits get lost when sigma >> |w|
        tiny[:10] = 0.0
        self.tiny = nn.Parameter(tiny, requires_grad=False)
        self.big = nn.Parameter(torch.randn(CHUNK + 1234, generator=g), requires_grad=False)


def snapshot(model):
    return {n: p.detach().clone().view(torch.uint8) if p.dtype != torch.uint8 else p.clone() for n, p in model.named_parameters()}


def assert_bytes_equal(model, snap):
    for n, p in model.named_parameters():
        assert torch.equal(p.detach().view(torch.uint8), snap[n]), f"{n} not restored bit-exactly"


@pytest.mark.parametrize("fused", [True, False], ids=["fused-kernel", "torch"])
def test_restore_bit_exact_1000_cycles(fused):
    model = Toy()
    pert = Perturber(model, fused=fused)
    snap = snapshot(model)
    saw_lossy = 0
    for i in range(1000):
        # most cycles on the small tensors only (fast), every 50th across chunks of the big one
        sigma = [1e-3, 2e-3, 5e-2][i % 3]
        if i % 50 == 0:
            p2 = pert
        else:
            p2 = Perturber(model, scope=["a", "b", "tiny"], fused=fused)
        corr = p2.perturb(seed=i, scale=sigma * (1 if i % 2 else -1))
        saw_lossy += bool(corr)
        p2.restore(seed=i, scale=sigma * (1 if i % 2 else -1), corrections=corr)
        assert_bytes_equal(model, snap)
    # plain subtraction would have failed: corrections were needed
    assert saw_lossy > 900


def test_fused_kernel_matches_torch_path_bit_for_bit():
    """Both paths give the same perturbed bytes and the same corrections, whatever the
    thread count, and either path's restore undoes the other's perturb exactly."""
    from esopt.es import kernels

    if not kernels.available(torch.zeros(1)):
        pytest.skip("numba not installed")
    model = Toy()
    snap = snapshot(model)
    fused, plain = Perturber(model, fused=True), Perturber(model, fused=False)
    threads = torch.get_num_threads()
    try:
        for i, (first, second, nthreads) in enumerate([(fused, plain, 1), (plain, fused, 2), (fused, fused, 2)]):
            torch.set_num_threads(nthreads)
            scale = [2e-3, -5e-2, 1e-3][i]
            corr = first.perturb(seed=i, scale=scale)
            perturbed = snapshot(model)
            second.restore(seed=i, scale=scale, corrections=corr)
            assert_bytes_equal(model, snap)
            corr2 = second.perturb(seed=i, scale=scale)
            assert_bytes_equal(model, perturbed)
            assert [(c.name, c.start, c.index.tolist(), c.values.tolist()) for c in corr] == \
                [(c.name, c.start, c.index.tolist(), c.values.tolist()) for c in corr2]
            first.restore(seed=i, scale=scale, corrections=corr2)
            assert_bytes_equal(model, snap)
            assert sum(c.index.numel() for c in corr) > 0
    finally:
        torch.set_num_threads(threads)


def test_plain_subtraction_is_not_exact():
    """Guards the premise: without corrections restore would be wrong."""
    w = torch.randn(100000) * 0.05
    d = tensor_noise(1, "w", w.numel()) * 1e-3
    assert not torch.equal((w + d) - d, w)


def test_failing_rollout_leaves_weights_restored():
    model = Toy()
    pert = Perturber(model)
    snap = snapshot(model)
    with pytest.raises(RuntimeError, match="boom"):
        with pert.perturbed(seed=7, sigma=1e-2):
            assert not torch.equal(model.a.view(torch.uint8), snap["a"])  # really perturbed inside
            raise RuntimeError("boom")
    assert_bytes_equal(model, snap)


def test_perturbation_is_sigma_times_noise():
    model = Toy()
    before = model.b.detach().clone()
    pert = Perturber(model)
    with pert.perturbed(seed=3, sigma=0.1, sign=-1):
        got = model.b.detach().view(-1) - before.view(-1)
    want = -0.1 * tensor_noise(3, "b", before.numel())
    assert torch.allclose(got, want, atol=1e-6)


def test_noise_moments():
    x = tensor_noise(11, "layer.weight", 2_000_000).double()
    assert abs(x.mean().item()) < 5 / math.sqrt(x.numel())
    assert abs(x.var().item() - 1) < 0.01
    kurt = ((x - x.mean()) ** 4).mean().item() / x.var().item() ** 2
    assert abs(kurt - 3) < 0.05


def test_noise_independent_across_tensors_and_seeds():
    n = 200_000
    a = tensor_noise(5, "layers.0.w", n)
    b = tensor_noise(5, "layers.1.w", n)  # same shape, same member
    c = tensor_noise(6, "layers.0.w", n)  # same tensor, other member
    bound = 5 / math.sqrt(n)
    for u, v in ((a, b), (a, c)):
        r = np.corrcoef(u.numpy(), v.numpy())[0, 1]
        assert abs(r) < bound, r
    assert tensor_seed(5, "layers.0.w") != tensor_seed(5, "layers.1.w")


def test_noise_reproducible_and_thread_independent():
    code = (
        "import torch,sys;torch.set_num_threads(int(sys.argv[1]));"
        "from esopt.es.noise import tensor_noise;"
        "x=tensor_noise(42,'w',3_000_000);import hashlib;print(hashlib.sha256(x.numpy().tobytes()).hexdigest())"
    )
    outs = {subprocess.run([sys.executable, "-c", code, str(t)], capture_output=True, text=True, check=True).stdout for t in (1, 2, 4)}
    assert len(outs) == 1
    x1 = tensor_noise(42, "w", 1000)
    assert torch.equal(x1, tensor_noise(42, "w", 1000))
    assert not torch.equal(x1, tensor_noise(43, "w", 1000))


def test_update_equals_naive_reference():
    model = Toy()
    pert = Perturber(model, scope=["a", "b", "big"])
    base = {n: p.detach().clone().double() for n, p in model.named_parameters()}
    seeds = [10, 10, 11, 11, 12, 12]
    coefs = [0.7, -0.2, 1.3, 0.4, -1.1, 0.05]
    alpha, G = 0.01, 6
    pert.apply_update(seeds, coefs, alpha, G)
    for name in ("a", "b", "big"):
        p = dict(model.named_parameters())[name]
        ref = base[name].view(-1).clone()
        for s, c in zip(seeds, coefs):
            ref += alpha / G * c * tensor_noise(s, name, p.numel()).double()
        assert torch.allclose(p.detach().view(-1).double(), ref, atol=1e-6), name
    assert torch.equal(model.tiny.detach(), base["tiny"].float())  # outside scope: untouched


def test_zero_coefficients_give_no_update():
    model = Toy()
    h = weights_hash(model)
    Perturber(model).apply_update([1, 2], [0.0, 0.0], 0.1, 2)
    assert weights_hash(model) == h


def test_scopes(tiny_model):
    full = {n for n, _ in select_parameters(tiny_model, "full")}
    lin = {n for n, _ in select_parameters(tiny_model, "all_linear")}
    assert "model.embed_tokens.weight" in full and "model.embed_tokens.weight" not in lin
    assert all("proj" in n for n in lin) and lin < full
    pat = {n for n, _ in select_parameters(tiny_model, ["*.mlp.*"])}
    assert pat and all(".mlp." in n for n in pat)
    with pytest.raises(ValueError, match="selects no parameters"):
        select_parameters(tiny_model, ["nothing*"])
    with pytest.raises(ValueError, match="unknown parameter scope"):
        select_parameters(tiny_model, "most")


def test_scope_presets_select_their_part_of_the_model(tiny_model):
    def chosen(scope):
        return [n for n, _ in select_parameters(tiny_model, scope)]

    full = chosen("full")
    assert chosen("norms") == [n for n in full if "norm" in n]  # tiny-llama has no biases
    attention = chosen("attention")
    assert attention == [n for n in full if ".self_attn." in n] and len(attention) == 8
    assert chosen("mlp") == [n for n in full if ".mlp." in n] == chosen(["*.mlp.*"])
    assert chosen("last:1") == [n for n in full if n.startswith("model.layers.1.") or n == "model.norm.weight"]
    assert chosen("last:2") == [n for n in full if ".layers." in n or n == "model.norm.weight"]
    assert chosen("last:9") == chosen("last:2")  # more blocks than the model has: all of them
    with pytest.raises(ValueError, match="unknown parameter scope"):
        select_parameters(tiny_model, "last:x")


def test_scope_presets_move_only_their_parameters(tiny_model):
    before = {n: p.detach().clone() for n, p in tiny_model.named_parameters()}
    Perturber(tiny_model, scope="norms").apply_update([5, 6], [1.0, -0.5], 0.05, 2)
    moved = {n for n, p in tiny_model.named_parameters() if not torch.equal(p, before[n])}
    assert moved == {n for n in before if "norm" in n}


def test_weights_hash_changes_with_one_bit(tiny_model):
    h = weights_hash(tiny_model)
    p = next(tiny_model.parameters())
    p.data.view(torch.int32).view(-1)[0] ^= 1
    assert weights_hash(tiny_model) != h


def test_antithetic_members_are_exact_negatives():
    model = Toy()
    base = model.a.detach().clone()
    pert = Perturber(model, scope=["a"])
    with pert.perturbed(seed=9, sigma=0.01, sign=1):
        plus = model.a.detach().clone() - base
    with pert.perturbed(seed=9, sigma=0.01, sign=-1):
        minus = model.a.detach().clone() - base
    assert torch.allclose(plus, -minus, rtol=0, atol=2e-8) and plus.abs().max() > 1e-3  # equal up to weight rounding
    scaled = 0.01 * tensor_noise(9, "a", base.numel()).view_as(base)
    assert torch.equal((base + scaled) - base, plus)  # +eps member: exactly w + sigma*eps, rounded once
