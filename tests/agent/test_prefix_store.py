"""The shared prompt prefix (system prompt, examples) is encoded once per rollout, not once per turn
(models/prefix.py PrefixStore): the replies are those of encoding it every turn, bit for bit."""
import pytest

from esopt.models import HFPolicy, load_model
from esopt.models.policy import Sampling

from test_kv_reuse import play


class NoStore(HFPolicy):
    def new_prefix_store(self):
        return None


class Spy(HFPolicy):
    stores: list

    def new_prefix_store(self):
        store = super().new_prefix_store()
        self.stores = getattr(self, "stores", []) + [store]
        return store


@pytest.mark.parametrize("alias", ["tiny-llama", "tiny-qwen2"])
@pytest.mark.parametrize("sampling", [Sampling(), Sampling(temperature=1.0)])
def test_the_prefix_is_encoded_once_per_rollout_with_the_same_replies(esopt_cache, alias, sampling):
    from esopt.agent.rollout import AgentContext

    model, tok = load_model(alias)
    context = AgentContext(system_prompt="You are a terse echo agent. Reply briefly. " * 3, history="window")
    plain_pol, spy = NoStore(model, tok, batch_size=3), Spy(model, tok, batch_size=3)  # two batches per turn
    plain = play(plain_pol, "off", sampling=sampling, context=context, record_ids=True)
    stored = play(spy, "off", sampling=sampling, context=context, record_ids=True)
    assert stored == plain  # the same replies and reply token ids, turn by turn
    (store,) = spy.stores
    assert store.misses >= 1 and store.hits >= 4  # turns 2..5 (and the second batch of a turn) reuse it
    assert spy.tokens_prefilled < plain_pol.tokens_prefilled
