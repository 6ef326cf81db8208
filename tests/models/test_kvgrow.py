"""GrowingLayer (models/kvgrow.py): the same keys/values as transformers' DynamicLayer, decoded
into spare room of one buffer instead of a copy of the whole cache per token; and generation
through every path of HFPolicy gives the same tokens with it as without it."""
import pytest
import torch
from transformers.cache_utils import DynamicLayer

from esopt.models import HFPolicy, load_model
from esopt.models.kvgrow import GrowingLayer, growing_cache
from esopt.models.decode import DecodeOptions, Sampling


def _states(g, b, n):
    return torch.randn(b, 3, n, 8, generator=g), torch.randn(b, 3, n, 8, generator=g)


def test_growing_layer_holds_what_dynamic_layer_holds_and_decodes_in_place():
    g = torch.Generator().manual_seed(0)
    grow, plain = GrowingLayer(reserve=4), DynamicLayer()
    ptrs = []
    for n in (5, 1, 1, 1, 1, 1, 1, 2):  # a prefill, then single tokens past the reserve, then two at once
        k, v = _states(g, 2, n)
        kg, vg = grow.update(k, v)
        kp, vp = plain.update(k, v)
        assert torch.equal(kg, kp) and torch.equal(vg, vp)
        ptrs.append(kg.data_ptr())
    assert grow.get_seq_length() == plain.get_seq_length() == 13
    # prefill 5 + reserve 4: the next three tokens land in the same buffer; the 5th decoded one regrows it
    assert ptrs[1] == ptrs[2] == ptrs[3] == ptrs[4] == ptrs[0]
    assert ptrs[5] != ptrs[4] and ptrs[6] == ptrs[5]


def test_growing_layer_adopts_tensors_put_in_from_outside():
    """expand_cache and row selection replace keys/values; crop shortens them: the next update
    starts from what is there now."""
    g = torch.Generator().manual_seed(1)
    grow, plain = GrowingLayer(reserve=8), DynamicLayer()
    k, v = _states(g, 1, 6)
    grow.update(k, v), plain.update(k, v)
    rows = torch.tensor([0, 0, 0])
    for layer in (grow, plain):  # one prefix copied to three rows (models/prefix.expand_cache)
        layer.keys, layer.values = layer.keys.index_select(0, rows), layer.values.index_select(0, rows)
    for n in (3, 1):
        k, v = _states(g, 3, n)
        assert all(torch.equal(a, b) for a, b in zip(grow.update(k, v), plain.update(k, v)))
    grow.crop(-2), plain.crop(-2)
    k, v = _states(g, 3, 1)
    assert all(torch.equal(a, b) for a, b in zip(grow.update(k, v), plain.update(k, v)))
    assert grow.get_seq_length() == 9


def test_growing_cache_keeps_other_layer_kinds(esopt_cache):
    model, _ = load_model("tiny-llama")
    cache = growing_cache(model.config, 16)
    assert len(cache.layers) == model.config.num_hidden_layers
    assert all(type(layer) is GrowingLayer for layer in cache.layers)


class Recorder(HFPolicy):
    """Records the cache layer kinds each generate call decoded with."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.kinds, self.caches, gen = [], [], self.model.generate

        def spy(*args, **kwargs):
            out = gen(*args, **kwargs)
            self.kinds.append({type(layer).__name__ for layer in out.cache.layers})
            self.caches.append(out.cache)
            return out

        self.generate_fn = spy

    def _generate_batch(self, *a, **kw):
        real, self.model.generate = self.model.generate, self.generate_fn
        try:
            return super()._generate_batch(*a, **kw)
        finally:
            self.model.generate = real


@pytest.mark.parametrize("alias", ["tiny-llama", "tiny-qwen2"])
def test_generation_is_the_same_with_and_without_growing_caches(esopt_cache, alias):
    """Plain rows, a shared prefix, per-episode caches across turns, and sampling: same tokens."""
    from tests.agent.test_kv_reuse import play

    model, tok = load_model(alias)
    shared = [{"role": "system", "content": "You fill sudoku cells. " * 4}]
    convs = [shared + [{"role": "user", "content": f"board {i} " * (1 + i % 3)}] for i in range(6)]
    s = Sampling(temperature=1.0)
    for kwargs in ({"prefix_cache": False}, {"prefix_cache": True}):
        old = HFPolicy(model, tok, grow_cache=False, **kwargs)
        new = Recorder(model, tok, **kwargs)
        ids_old, ids_new = [], []
        assert old.generate(convs, DecodeOptions(10), token_ids=ids_old) == new.generate(convs, DecodeOptions(10), token_ids=ids_new)
        assert ids_old == ids_new
        assert old.generate(convs, DecodeOptions(10, s, seed=3)) == new.generate(convs, DecodeOptions(10, s, seed=3))
        assert new.kinds and all(k == {"GrowingLayer"} for k in new.kinds)
    old, new = HFPolicy(model, tok, batch_size=3, grow_cache=False), Recorder(model, tok, batch_size=3)
    plain = play(old, "auto", record_ids=True)
    assert play(new, "auto", record_ids=True) == plain
    assert play(old, "off", record_ids=True) == plain
    assert len({r for ep in plain for r, _ in ep}) > 3  # replies differ (the comparison can fail)
    assert all(k == {"GrowingLayer"} for k in new.kinds)
    # the turn cache keeps its own copy of each row: the batch's buffers are freed when it is stored
    assert all(layer._kbuf is None and layer.keys is None for c in new.caches for layer in c.layers)
