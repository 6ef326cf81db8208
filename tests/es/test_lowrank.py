import math

import pytest
import torch

from esopt.es.lowrank import LowRankPerturber
from esopt.es.perturb import weights_hash


def test_batched_rows_equal_per_member_forward(tiny_model):
    lr = LowRankPerturber(tiny_model, rank=2)
    ids = torch.randint(0, 200, (5, 7))
    seeds, scales = [11, 12, 11], [0.05, -0.02, -0.05]  # an antithetic pair and one more member
    rows = torch.tensor([0, 1, 2, 0, 1])
    base_hash = weights_hash(tiny_model)
    with torch.no_grad(), lr.side_terms(seeds, scales, rows):
        batched = tiny_model(ids).logits
    for j in range(5):
        m = int(rows[j])
        with torch.no_grad(), lr.side_terms([seeds[m]], [scales[m]], torch.tensor([0])):
            single = tiny_model(ids[j : j + 1]).logits
        assert torch.allclose(batched[j], single[0], atol=1e-5), j
    assert weights_hash(tiny_model) == base_hash  # side terms never touch the weights
    with torch.no_grad():
        plain = tiny_model(ids).logits
    assert not torch.allclose(plain[0], batched[0], atol=1e-4)  # the perturbation really acts
    with torch.no_grad(), lr.side_terms(seeds, scales, rows):
        pass
    with torch.no_grad():
        assert torch.equal(tiny_model(ids).logits, plain)  # hooks removed on exit


def test_side_term_equals_merged_weights(tiny_model):
    lr = LowRankPerturber(tiny_model, rank=3)
    ids = torch.randint(0, 200, (2, 6))
    with torch.no_grad(), lr.side_terms([5], [0.03], torch.tensor([0, 0])):
        side = tiny_model(ids).logits
    with torch.no_grad():
        for name, mod in lr.linears:
            mod.weight.add_(0.03 * lr.delta(5, name, mod))
        merged = tiny_model(ids).logits
    assert torch.allclose(side, merged, atol=1e-4)


def test_update_equals_naive_reference(tiny_model):
    lr = LowRankPerturber(tiny_model, rank=2)
    before = {n: m.weight.detach().clone().double() for n, m in lr.linears}
    seeds, coefs = [1, 1, 2, 2], [0.5, -0.5, 1.5, 0.25]
    lr.apply_update(seeds, coefs, alpha=0.01, population=4)
    for name, mod in lr.linears:
        ref = before[name].clone()
        for s, c in zip(seeds, coefs):
            a, b = lr.factors(s, name, mod.out_features, mod.in_features)
            ref += 0.01 / 4 * c * (a.double() @ b.double().T) / math.sqrt(2)
        assert torch.allclose(mod.weight.double(), ref, atol=1e-6), name


def test_factors_reproducible_and_independent(tiny_model):
    lr = LowRankPerturber(tiny_model, rank=1)
    (n1, m1), (n2, m2) = lr.linears[0], lr.linears[4]
    a1, _ = lr.factors(3, n1, 64, 64)
    assert torch.equal(a1, lr.factors(3, n1, 64, 64)[0])
    assert not torch.equal(a1, lr.factors(4, n1, 64, 64)[0])
    assert not torch.equal(a1, lr.factors(3, n2, 64, 64)[0])


def test_errors(tiny_model):
    with pytest.raises(ValueError, match="rank"):
        LowRankPerturber(tiny_model, rank=0)
    with pytest.raises(ValueError, match="found none"):
        LowRankPerturber(tiny_model, scope=["model.norm.weight"])
    lr = LowRankPerturber(tiny_model)
    with pytest.raises(RuntimeError, match="set up for 2 rows"):
        with torch.no_grad(), lr.side_terms([1], [0.1], torch.tensor([0, 0])):
            tiny_model(torch.zeros(3, 4, dtype=torch.long))


def test_others_full_perturbs_restores_and_updates_the_remaining_tensors(tiny_model):
    import copy

    from esopt.es.noise import GaussianNoise
    from esopt.es.perturb import Perturber

    frozen = LowRankPerturber(tiny_model, rank=2, scope="full")
    assert frozen.others is None and "others" not in frozen.describe()
    lr = LowRankPerturber(tiny_model, rank=2, scope="full", others="full", others_noise=GaussianNoise())
    side = {id(m.weight) for _, m in lr.linears}
    rest = [n for n, p in tiny_model.named_parameters() if id(p) not in side]
    assert rest and [n for n, _ in lr.others.params] == rest  # norms and the rest, each once
    assert lr.numel == sum(p.numel() for _, p in tiny_model.named_parameters())
    ids = torch.randint(0, 200, (2, 6))
    base_hash = weights_hash(tiny_model)

    # one member = its side terms + its full-rank noise on the other tensors, as if merged into the weights
    ref_model = copy.deepcopy(tiny_model)
    ref = Perturber(ref_model, rest, GaussianNoise(), fused=False)
    ref.perturb(7, -0.03)
    with torch.no_grad():
        for (name, mod), (_, ref_mod) in zip(lr.linears, LowRankPerturber(ref_model, rank=2, scope="full").linears):
            ref_mod.weight.add_(-0.03 * lr.delta(7, name, mod))
        want = ref_model(ids).logits
        with lr.others_perturbed(7, 0.03, -1), lr.side_terms([7], [-0.03], torch.tensor([0, 0])):
            got = tiny_model(ids).logits
    assert torch.allclose(got, want, atol=1e-4)
    assert weights_hash(tiny_model) == base_hash  # restored exactly

    # the update moves the other tensors like full-rank ES, and the linear weights by the low-rank rule
    ref_model = copy.deepcopy(tiny_model)
    seeds, coefs = [1, 1, 2, 2], [0.5, -0.5, 1.5, 0.25]
    lr.apply_update(seeds, coefs, alpha=0.01, population=4)
    Perturber(ref_model, rest, GaussianNoise(), fused=False).apply_update(seeds, coefs, 0.01, 4)
    mine = dict(tiny_model.named_parameters())
    for name, p in ref_model.named_parameters():
        if name in rest:
            assert torch.equal(p, mine[name]), name
    norm = next(n for n in rest if "norm" in n)
    assert not torch.equal(mine[norm], torch.ones_like(mine[norm]))  # RMSNorm weights start at 1 and moved
    with pytest.raises(ValueError, match="lowrank_others"):
        LowRankPerturber(tiny_model, others="some")


def test_tied_embedding_sees_the_members_head_perturbation(tiny_model):
    """scope=full on a model whose output head shares the input embeddings: each batched row
    equals the model with that member's A B^T merged into the shared tensor (both uses)."""
    import copy

    lr = LowRankPerturber(tiny_model, rank=2, scope="full")
    assert len(lr.tied) == 1 and lr.linears[lr.tied[0][1]][0].endswith("lm_head")
    ids = torch.randint(0, 200, (3, 5))
    seeds, scales = [21, 22], [0.04, -0.03]
    rows = torch.tensor([1, 0, 1])
    with torch.no_grad(), lr.side_terms(seeds, scales, rows):
        batched = tiny_model(ids).logits
    for j in range(3):
        m = int(rows[j])
        merged = copy.deepcopy(tiny_model)
        with torch.no_grad():
            for (name, mod), (_, mmod) in zip(lr.linears, LowRankPerturber(merged, rank=2, scope="full").linears):
                mmod.weight.add_(scales[m] * lr.delta(seeds[m], name, mod))
            assert torch.allclose(batched[j], merged(ids[j : j + 1]).logits[0], atol=1e-4), j
