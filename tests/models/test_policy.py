import pytest

from esopt.models import HFPolicy, load_model
from esopt.models.policy import Sampling


@pytest.mark.parametrize("alias", ["tiny-llama", "tiny-qwen2"])
def test_prefix_cache_matches_plain_generation(esopt_cache, alias):
    model, tok = load_model(alias)
    shared = [{"role": "system", "content": "You fill sudoku cells. " * 4}]
    convs = [shared + [{"role": "user", "content": f"board {i} " * (1 + i % 3)}] for i in range(6)]
    plain = HFPolicy(model, tok, prefix_cache=False).generate(convs, 8)
    cached = HFPolicy(model, tok, prefix_cache=True).generate(convs, 8)
    assert plain == cached
    assert len(set(plain)) > 1  # different prompts give different replies (the test can fail)


def test_sampling_is_seeded_and_local(esopt_cache):
    import torch

    model, tok = load_model("tiny-llama")
    pol = HFPolicy(model, tok)
    convs = [[{"role": "user", "content": "hello"}]] * 4
    s = Sampling(temperature=1.0, top_p=1.0, top_k=0)
    state = torch.random.get_rng_state()
    a = pol.generate(convs, 12, s, seed=1)
    assert torch.equal(state, torch.random.get_rng_state())  # global RNG untouched
    assert a == pol.generate(convs, 12, s, seed=1)
    assert a != pol.generate(convs, 12, s, seed=2)


@pytest.mark.parametrize("alias", ["tiny-llama", "tiny-qwen2"])
def test_lowrank_per_member_prefix_cache_matches_plain(esopt_cache, alias):
    """Rows of different low-rank members: one prefix encoding per member gives the
    same greedy replies as encoding every row's whole prompt under its member."""
    import torch

    from esopt.es.lowrank import LowRankPerturber

    model, tok = load_model(alias)
    lr = LowRankPerturber(model, rank=2)
    shared = [{"role": "system", "content": "You fill sudoku cells. " * 4}]
    convs = [shared + [{"role": "user", "content": f"board {i % 3} " * (1 + i % 3)}] for i in range(9)]
    member = [0, 1, 2, 0, 1, 2, 2, 1, 0]  # rows 0, 1, 2 share a prompt but not a member
    seeds, scales = [5, 6, 5], [0.3, 0.3, -0.3]
    rows = torch.tensor(member)

    def ctx(idx):
        return lr.side_terms(seeds, scales, rows[idx])

    pol = HFPolicy(model, tok, batch_size=5)  # two batches: groups are sliced per batch
    plain = pol.generate(convs, 8, row_context=ctx)
    cached = pol.generate(convs, 8, row_context=ctx, row_groups=member)
    assert plain == cached
    assert len({plain[0], plain[1], plain[2]}) > 1  # members really differ on the same prompt
