import pytest

from esopt.models import HFPolicy, load_model
from esopt.models.decode import DecodeOptions, RowWeights, Sampling


@pytest.mark.parametrize("alias", ["tiny-llama", "tiny-qwen2"])
def test_prefix_cache_matches_plain_generation(esopt_cache, alias):
    model, tok = load_model(alias)
    shared = [{"role": "system", "content": "You fill sudoku cells. " * 4}]
    convs = [shared + [{"role": "user", "content": f"board {i} " * (1 + i % 3)}] for i in range(6)]
    plain = HFPolicy(model, tok, prefix_cache=False).generate(convs, DecodeOptions(8))
    cached = HFPolicy(model, tok, prefix_cache=True).generate(convs, DecodeOptions(8))
    assert plain == cached
    assert len(set(plain)) > 1  # different prompts give different replies (the test can fail)


def test_sampling_is_seeded_and_local(esopt_cache):
    import torch

    model, tok = load_model("tiny-llama")
    pol = HFPolicy(model, tok)
    convs = [[{"role": "user", "content": "hello"}]] * 4
    s = Sampling(temperature=1.0, top_p=1.0, top_k=0)
    state = torch.random.get_rng_state()
    a = pol.generate(convs, DecodeOptions(12, s, seed=1))
    assert torch.equal(state, torch.random.get_rng_state())  # global RNG untouched
    assert a == pol.generate(convs, DecodeOptions(12, s, seed=1))
    assert a != pol.generate(convs, DecodeOptions(12, s, seed=2))


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
    plain = pol.generate(convs, DecodeOptions(8), rows=RowWeights(ctx))
    cached = pol.generate(convs, DecodeOptions(8), rows=RowWeights(ctx, member))
    assert plain == cached
    assert len({plain[0], plain[1], plain[2]}) > 1  # members really differ on the same prompt


def test_a_reply_decoded_in_slices_continues_from_its_cache(esopt_cache):
    """How esopt serve decodes a long reply (serve/scheduler.py SLICE_TOKENS): slices of 10 tokens, each continuing
    the reply so far (tails) from the keys/values a TurnCache kept, give the reply of one call, and a continued
    slice encodes one token per row (the last one decoded), none of the prompt or of the reply before it."""
    from esopt.models.decode import Caches
    from esopt.models.turncache import TurnCache

    model, tok = load_model("tiny-llama")
    convs = [[{"role": "user", "content": f"a long question number {i} " * (2 + i)}] for i in range(3)]
    whole = HFPolicy(model, tok)
    ids_whole: list = []
    want = whole.generate(convs, DecodeOptions(40, ignore_eos=True), token_ids=ids_whole)
    pol, cache, keys = HFPolicy(model, tok), TurnCache(), ["a", "b", "c"]
    tails = [[] for _ in convs]
    prefilled = []
    for k in range(4):
        before, ids = pol.tokens_prefilled, []
        pol.generate(convs, DecodeOptions(10, ignore_eos=True), caches=Caches(cache, keys), tails=tails, token_ids=ids)
        prefilled.append(pol.tokens_prefilled - before)
        tails = [tail + reply for tail, (_, reply) in zip(tails, ids)]
    assert [tok.decode(t, skip_special_tokens=True) for t in tails] == want
    assert tails == [reply for _, reply in ids_whole]
    assert prefilled[0] > 50 and prefilled[1:] == [3, 3, 3], prefilled  # the first: the prompts (a shared prefix once)
    assert cache.stats["reused_tokens"] > 0 and cache.stats["misses"] == 0
