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
