"""agent.decode=static/compiled (models/static.py): preallocated KV caches on every generate path give
the greedy replies of the dynamic path; compiled decoding keeps one cache per shape and resets it in
place (on the CPU transformers does not compile: the CUDA-graph path is in tests/es/test_cuda.py)."""
import pytest
import torch

from esopt.models import HFPolicy, load_model
from esopt.models.decode import DecodeOptions, RowWeights, Sampling
from esopt.models.static import BUCKET, StaticCaches, capacity

from test_kvgrow import Recorder


@pytest.mark.parametrize("alias", ["tiny-llama", "tiny-qwen2"])
@pytest.mark.parametrize("decode", ["static", "compiled"])
def test_static_caches_give_the_dynamic_paths_greedy_replies(esopt_cache, alias, decode):
    """Plain rows, a shared prefix copied into the cache's head, and per-episode caches across turns."""
    from tests.agent.test_kv_reuse import play

    model, tok = load_model(alias)
    shared = [{"role": "system", "content": "You fill sudoku cells. " * 4}]
    convs = [shared + [{"role": "user", "content": f"board {i} " * (1 + i % 3)}] for i in range(6)]
    for kwargs in ({"prefix_cache": False}, {"prefix_cache": True}):
        old = HFPolicy(model, tok, **kwargs)
        new = Recorder(model, tok, decode=decode, **kwargs)
        ids_old, ids_new = [], []
        assert old.generate(convs, DecodeOptions(10), token_ids=ids_old) == new.generate(convs, DecodeOptions(10), token_ids=ids_new)
        assert ids_old == ids_new
        assert new.kinds and all(k == {"StaticLayer"} for k in new.kinds)
    old, new = HFPolicy(model, tok, batch_size=3), Recorder(model, tok, batch_size=3, decode=decode)
    plain = play(old, "auto", record_ids=True)
    assert play(new, "auto", record_ids=True) == plain  # turn cache: earlier turns copied into the static cache
    assert play(new, "off", record_ids=True) == plain
    assert len({r for ep in plain for r, _ in ep}) > 3  # replies differ (the comparison can fail)
    assert all(k == {"StaticLayer"} for k in new.kinds)


def test_static_caches_under_low_rank_side_terms(esopt_cache):
    """Rows of different members (side terms) decode with a static cache as with a dynamic one."""
    from esopt.es.lowrank import LowRankPerturber
    from tests.agent.test_kv_reuse import play

    model, tok = load_model("tiny-llama")
    lr = LowRankPerturber(model, rank=1, scope="full")
    rows = torch.tensor([0, 1, 0, 1, 1])

    def row_context(idx):
        return lr.side_terms([3, 4], [0.05, -0.05], rows[idx])

    extra = {"rows": RowWeights(row_context, rows.tolist())}
    plain = play(HFPolicy(model, tok, batch_size=3), "auto", **extra)
    assert play(HFPolicy(model, tok, batch_size=3, decode="compiled"), "auto", **extra) == plain
    assert plain != play(HFPolicy(model, tok, batch_size=3), "auto")  # the side terms changed the replies


def test_compiled_decoding_reuses_one_cache_per_shape(esopt_cache):
    model, tok = load_model("tiny-llama")
    pool = StaticCaches(model.config, keep=True)
    a = pool.get(4, 100)
    a.layers[0].lazy_initialization(torch.ones(4, 2, 1, 32), torch.ones(4, 2, 1, 32))
    a.layers[0].keys.fill_(1.0)
    a.layers[0].cumulative_length.fill_(7)
    b = pool.get(4, 90)  # same batch, same capacity bucket: the same cache, emptied in place
    assert b is a and capacity(100) == capacity(90) == 2 * BUCKET
    assert int(b.layers[0].cumulative_length) == 0 and not b.layers[0].keys.any()
    assert pool.get(4, 200) is not a and pool.get(3, 100) is not a
    assert StaticCaches(model.config).get(4, 100) is not StaticCaches(model.config).get(4, 100)
    policy = HFPolicy(model, tok, decode="compiled")
    convs = [[{"role": "user", "content": f"cell {i}"}] for i in range(3)]
    first = policy.generate(convs, DecodeOptions(6))
    kept = list(policy.static._pool.values())
    assert policy.generate(convs, DecodeOptions(6)) == first and list(policy.static._pool.values()) == kept


def test_decode_setting(esopt_cache):
    from esopt.config import ConfigError, load_config

    model, tok = load_model("tiny-llama")
    with pytest.raises(ValueError, match="unknown agent.decode 'graph'"):
        HFPolicy(model, tok, decode="graph")
    assert load_config(None, ["agent.decode=compiled"]).agent.decode == "compiled"
    with pytest.raises(ConfigError, match="agent.decode"):
        load_config(None, ["agent.decode=graph"])


def test_sampled_replies_are_the_dynamic_paths(esopt_cache):
    """Sampling draws from the same distributions (equal to float rounding), seeded alike: same replies here."""
    model, tok = load_model("tiny-qwen2")
    convs = [[{"role": "user", "content": f"row {i} " * (i + 1)}] for i in range(4)]
    s = Sampling(temperature=1.0)
    assert HFPolicy(model, tok).generate(convs, DecodeOptions(8, s, seed=5)) == HFPolicy(
        model, tok, decode="static").generate(convs, DecodeOptions(8, s, seed=5))
