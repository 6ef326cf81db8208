"""GRPO's pure parts: group advantages, loss weights, the clipped loss against a naive reference."""
import math

import pytest
import torch

from esopt.algos.grpo.grpo import Batch, TurnSample, clipped_loss, collate, group_advantages, set_token_weights


def test_advantages_normalised_within_each_group():
    adv = group_advantages([[0.0, 1.0, 0.0, 1.0], [0.2, 0.4, 0.6, 0.8]])
    assert adv.shape == (2, 4)
    assert torch.allclose(adv[0], torch.tensor([-1.0, 1.0, -1.0, 1.0], dtype=adv.dtype), atol=1e-5)
    for row in adv:  # zero mean, unit (population) std per group: groups do not mix
        assert abs(float(row.mean())) < 1e-12
        assert float(row.std(unbiased=False)) == pytest.approx(1.0, abs=1e-5)


def test_flat_group_gets_exactly_zero():
    # 0.1 + 0.1 + 0.1 is not 0.3: a naive (r - mean) / (std + eps) gives ~1e-11, not 0
    adv = group_advantages([[0.1, 0.1, 0.1], [0.0, 0.0, 1.0]])
    assert torch.equal(adv[0], torch.zeros(3, dtype=adv.dtype))
    assert (adv[1] != 0).all()
    assert torch.equal(group_advantages([[0.7] * 5], scale_std=False), torch.zeros(1, 5, dtype=adv.dtype))


def test_advantages_without_std_scaling_are_mean_centred():
    adv = group_advantages([[0.0, 1.0, 2.0], [5.0, 5.0, 8.0]], scale_std=False)
    assert torch.allclose(adv, torch.tensor([[-1.0, 0.0, 1.0], [-1.0, -1.0, 2.0]], dtype=adv.dtype))


def test_nonfinite_reward_counts_as_group_worst():
    adv = group_advantages([[float("nan"), 1.0, 0.0], [float("nan")] * 3])
    assert torch.allclose(adv[0], group_advantages([[0.0, 1.0, 0.0]])[0])
    assert torch.equal(adv[1], torch.zeros(3, dtype=adv.dtype))
    with pytest.raises(ValueError, match="groups, group_size"):
        group_advantages([1.0, 2.0])


def samples_of(lengths_by_episode):
    out = []
    for e, lengths in enumerate(lengths_by_episode):
        for n in lengths:
            out.append(TurnSample([1, 2, 3], list(range(10, 10 + n)), advantage=1.0, episode=e))
    return out


def test_token_and_episode_normalisation():
    s = samples_of([[2, 3], [5]])  # episode 0: 5 tokens in two turns, episode 1: 5 tokens
    set_token_weights(s, "token")
    assert all(x.weight == pytest.approx(0.1) for x in s)
    s = samples_of([[1, 1], [6]])
    set_token_weights(s, "episode")
    assert [x.weight for x in s] == pytest.approx([0.25, 0.25, 1 / 12])
    assert sum(x.weight * len(x.response_ids) for x in s) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        set_token_weights(s, "sequence")


def random_batch(B=5, R=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(B, R, generator=g) > 0.3
    mask[:, -1] = True
    weights = torch.where(mask, torch.rand(B, R, generator=g), torch.zeros(B, R))
    adv = torch.randn(B, generator=g)
    targets = torch.zeros(B, R, dtype=torch.long)
    batch = Batch(targets, targets, targets, targets, mask, weights, adv)
    logp = -torch.rand(B, R, generator=g) * 3
    old = logp + 0.4 * torch.randn(B, R, generator=g)  # ratios well inside and outside [0.8, 1.2]
    ref = logp + 0.3 * torch.randn(B, R, generator=g)
    return batch, logp, old, ref


def naive_loss(batch, logp, old, ref, eps, beta):
    total, clipped, weight = 0.0, 0.0, 0.0
    B, R = logp.shape
    for b in range(B):
        for r in range(R):
            if not batch.mask[b, r]:
                continue
            a = float(batch.advantages[b])
            ratio = math.exp(float(logp[b, r] - old[b, r]))
            unclipped, clip = ratio * a, min(max(ratio, 1 - eps), 1 + eps) * a
            d = float(ref[b, r] - logp[b, r])
            term = -min(unclipped, clip) + beta * (math.exp(d) - d - 1)
            w = float(batch.weights[b, r])
            total += w * term
            clipped += w * (clip < unclipped)
            weight += w
    return total, clipped / weight


@pytest.mark.parametrize("beta", [0.0, 0.1])
def test_clipped_loss_matches_naive_reference(beta):
    batch, logp, old, ref = random_batch()
    loss, stats = clipped_loss(logp, old, batch, 0.2, ref if beta else None, beta)
    want, clip_frac = naive_loss(batch, logp, old, ref, 0.2, beta)
    assert float(loss) == pytest.approx(want, rel=1e-5, abs=1e-6)
    assert stats["clipped"] / stats["weight"] == pytest.approx(clip_frac)
    assert 0 < clip_frac < 1  # the data exercises both branches


def test_clipping_stops_the_gradient_only_where_it_should():
    mask = torch.ones(1, 4, dtype=torch.bool)
    batch = Batch(*([torch.zeros(1, 4, dtype=torch.long)] * 4), mask, torch.full((1, 4), 0.25), torch.tensor([1.0]))
    old = torch.zeros(1, 4)
    # ratios 1.5 (clipped: A > 0 and above 1 + eps), 1.1, 0.9 (inside), 0.5 (below: the min keeps the unclipped term)
    logp = torch.log(torch.tensor([[1.5, 1.1, 0.9, 0.5]])).requires_grad_()
    loss, _ = clipped_loss(logp, old, batch, 0.2)
    (g,) = torch.autograd.grad(loss, logp)
    assert g[0, 0] == 0 and (g[0, 1:] != 0).all()
    # first inner step: ratio 1, the loss is -sum(w A) and its gradient is the REINFORCE one, -w A
    logp = torch.randn(1, 4).requires_grad_()
    loss, stats = clipped_loss(logp, logp.detach(), batch, 0.2)
    (g,) = torch.autograd.grad(loss, logp)
    assert float(loss.detach()) == pytest.approx(-1.0) and torch.allclose(g, torch.full((1, 4), -0.25))
    assert stats["ratio_max_dev"] == 0.0


def test_collate_left_pads_so_responses_end_together():
    s = [TurnSample([5, 6, 7, 8], [20, 21], 1.0, 0, 0.5), TurnSample([5, 6], [30, 31, 32], -1.0, 1, 0.25)]
    b = collate(s, pad_id=0)
    assert b.input_ids.tolist() == [[5, 6, 7, 8, 20, 21], [0, 5, 6, 30, 31, 32]]
    assert b.targets.tolist() == [[8, 20, 21], [30, 31, 32]]
    assert b.mask.tolist() == [[False, True, True], [True, True, True]]
    assert b.weights.tolist() == [[0.0, 0.5, 0.5], [0.25, 0.25, 0.25]]
    assert b.attention_mask.tolist() == [[1] * 6, [0] + [1] * 5]
    assert b.position_ids.tolist() == [[0, 1, 2, 3, 4, 5], [0, 0, 1, 2, 3, 4]]
