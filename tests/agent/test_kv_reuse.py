"""KV reuse across turns (agent.kv_reuse, models/turncache.py) gives the replies of
the plain path, which re-encodes every prompt, while encoding fewer tokens."""
import pytest

from esopt.agent.rollout import AgentContext, RolloutSettings, rollout
from esopt.models import HFPolicy, load_model
from esopt.models.decode import Caches, DecodeOptions, RowWeights, Sampling


class EchoEnv:
    """Scripted multi-turn env: each observation quotes the reply; episodes of
    different lengths end at different turns."""

    def __init__(self, k: int, turns: int):
        self.k, self.turns, self.t = k, turns, 0

    def first(self) -> str:
        return f"Episode {self.k}. " + "Say something. " * (1 + self.k % 3)

    def step(self, action):
        self.t += 1
        obs = f"Turn {self.t} of episode {self.k}: you said {action[:20]!r}." + " More." * ((self.k + self.t) % 4)
        return obs, float(len(action) % 3), self.t >= self.turns, False, {}


def play(policy, kv_reuse, turns=(4, 2, 5, 3, 4), sampling=Sampling(), context=None, rows=None, record_ids=False):
    envs = [EchoEnv(k, t) for k, t in enumerate(turns)]
    context = context or AgentContext(system_prompt="You are a terse echo agent. Reply briefly.", history="full")
    eps = rollout(policy, envs, [str(k) for k in range(len(envs))], [e.first() for e in envs], context,
                  RolloutSettings(DecodeOptions(6, sampling, seed=11), kv_reuse=kv_reuse, record_ids=record_ids),
                  rows=rows)
    return [[(t["response"], t.get("token_ids")) for t in ep.turns] for ep in eps]


class Spy(HFPolicy):
    """HFPolicy that keeps each rollout's TurnCache for inspection."""

    caches: list

    def new_turn_cache(self):
        cache = super().new_turn_cache()
        self.caches = getattr(self, "caches", []) + [cache]
        return cache


@pytest.mark.parametrize("alias", ["tiny-llama", "tiny-qwen2"])
def test_kv_reuse_equals_plain_greedy(esopt_cache, alias):
    model, tok = load_model(alias)
    plain_pol, kv_pol = HFPolicy(model, tok, batch_size=3), Spy(model, tok, batch_size=3)  # two batches per turn
    plain = play(plain_pol, "off", record_ids=True)
    kv = play(kv_pol, "auto", record_ids=True)
    assert kv == plain  # the same replies and the same reply token ids, turn by turn
    assert [len(ep) for ep in plain] == [4, 2, 5, 3, 4]
    assert len({r for ep in plain for r, _ in ep}) > 3  # replies differ across episodes and turns
    stats = kv_pol.caches[0].stats
    # a random model's reply may hold a special token that decoding drops: that episode's next
    # prompt departs from its cache inside the reply, and reuses the tokens before it
    assert stats["reused_tokens"] > 0 and stats["misses"] == 0
    assert kv_pol.tokens_prefilled < plain_pol.tokens_prefilled / 2
    assert kv_pol.caches[0].rows == {}  # dropped when the rollout returned


def test_kv_reuse_equals_plain_with_sampling(esopt_cache):
    """Each batch samples from its own seeded RNG in both paths; the batch composition and
    step count are the same, so equal logits give equal draws."""
    model, tok = load_model("tiny-llama")
    s = Sampling(temperature=1.0)
    plain = play(HFPolicy(model, tok, batch_size=3), "off", sampling=s)
    assert play(HFPolicy(model, tok, batch_size=3), "auto", sampling=s) == plain
    assert plain != play(HFPolicy(model, tok, batch_size=3), "off")  # sampling differs from greedy (test can fail)


def test_kv_reuse_with_lowrank_members_and_shared_prefix(esopt_cache):
    """Rows of different low-rank members: each episode's cache was computed under its
    own member's side terms, the first turn's shared prefix once per member."""
    import torch

    from esopt.es.lowrank import LowRankPerturber

    model, tok = load_model("tiny-llama")
    lr = LowRankPerturber(model, rank=2)
    member = [0, 1, 0, 1, 1]
    rows = torch.tensor(member)

    def ctx(idx):
        return lr.side_terms([5, 6], [0.3, -0.3], rows[idx])

    ctx_sys = AgentContext(system_prompt="You are a terse echo agent. Reply briefly. " * 3, history="full")
    plain = play(HFPolicy(model, tok, batch_size=3), "off", context=ctx_sys, rows=RowWeights(ctx, member))
    kv_pol = Spy(model, tok, batch_size=3)
    kv = play(kv_pol, "auto", context=ctx_sys, rows=RowWeights(ctx, member))
    assert kv == plain
    assert kv_pol.caches[0].stats["reused_tokens"] > 0
    same_prompt = play(HFPolicy(model, tok, batch_size=3), "off", context=ctx_sys)
    assert same_prompt != plain  # the members' weights matter (the test can fail)


def test_prefix_mismatch_reuses_only_the_common_prefix(esopt_cache):
    """A template that rewrites past turns (here: every past reply is replaced by a fixed
    text) departs from the cached tokens: only their common prefix is reused and the replies
    stay those of the plain path. A prompt sharing nothing with the cache is encoded whole."""
    model, tok = load_model("tiny-llama")

    class Rewriting(AgentContext):
        def conversation(self, past, observation):
            return super().conversation([(o, "(reply elided)") for o, _ in past], observation)

    ctx = Rewriting(system_prompt="You are a terse echo agent.", history="full")
    plain = play(HFPolicy(model, tok, batch_size=3), "off", context=ctx)
    pol = Spy(model, tok, batch_size=3)
    assert play(pol, "auto", context=ctx) == plain
    stats = pol.caches[0].stats
    assert stats["partial_matches"] > 0 and stats["reused_tokens"] > 0

    from esopt.models.turncache import TurnCache

    cache = TurnCache()
    conv = [[{"role": "user", "content": "hello there"}]]
    pol.generate(conv, DecodeOptions(4), caches=Caches(cache, ["a"]))
    ids = tok(pol.prompt_texts([[{"role": "user", "content": "other"}]])[0], add_special_tokens=False)["input_ids"]
    assert cache.reusable("a", ids) == 6  # only "<|im_start|>user\n" is shared (6 characters, 6 tokens)
    assert cache.reusable("a", [tok.pad_token_id] + ids) == 0 and cache.stats["misses"] == 1
    assert cache.reusable("b", ids) == 0  # no cache for that episode


def test_kv_reuse_off_with_window_history_or_switch(esopt_cache):
    model, tok = load_model("tiny-llama")
    pol = Spy(model, tok)
    play(pol, "auto", context=AgentContext(history="window", window=1))
    play(pol, "off")
    assert getattr(pol, "caches", []) == []  # no cache made: window history, or switched off
    with pytest.raises(ValueError, match="kv_reuse"):
        play(pol, "on")


def test_rows_with_and_without_cache_in_one_batch(esopt_cache):
    """A batch mixing an episode with cached tokens and one without (its whole prompt encoded
    beside the other's new tokens) gives the plain path's replies."""
    from esopt.models.turncache import TurnCache

    model, tok = load_model("tiny-llama")
    pol, cache = HFPolicy(model, tok), TurnCache()
    first = [[{"role": "user", "content": "hello there, how are you"}]]
    reply = pol.generate(first, DecodeOptions(6), caches=Caches(cache, ["a"]))[0]
    convs = [first[0] + [{"role": "assistant", "content": reply}, {"role": "user", "content": "and now?"}],
             [{"role": "user", "content": "a different and much longer first question, from a new episode"}]]
    assert pol.generate(convs, DecodeOptions(6), caches=Caches(cache, ["a", "b"])) == HFPolicy(model, tok).generate(
        convs, DecodeOptions(6))
    assert cache.stats["reused_tokens"] > 10 and set(cache.rows) == {"a", "b"}
