"""+ES with a tiny random model: members write under their own perturbation, one update per
operator batch, the weights change and the history replays them to the same hash; without
ES the same batches leave the weights as they were."""
import pytest
import torch

from esopt.ahd.search import Search, Settings
from esopt.ahd.weights import ModelProposer, WeightSteps
from esopt.config import ESConfig
from esopt.es.history import History
from esopt.es.build import make_perturber
from esopt.es.perturb import weights_hash
from esopt.models.policy import HFPolicy, Sampling
from esopt.models.tiny import build_tiny

from ahd_search_fakes import CodeFromModel, FakeEvaluator, ToyProblem

ES = ESConfig(population=4, sigma={"start": 0.05, "end": 0.05, "schedule": "constant"},
              alpha={"start": 0.05, "end": 0.05, "schedule": "constant"})


def tiny():
    torch.set_num_threads(1)
    model, tok = build_tiny("llama", hidden=32, layers=1)
    model.eval().requires_grad_(False)
    tok.padding_side = "left"
    return model, tok


def search(model, tok, tmp_path, es: bool, budget=8):
    prob = ToyProblem()
    steps = None
    if es:
        steps = WeightSteps(model, ES, seed=0, steps=budget // ES.population,
                            history=History(tmp_path / "history.json", meta={"model": "tiny"}))
    proposer = CodeFromModel(ModelProposer(HFPolicy(model, tok, batch_size=1), 6, Sampling(),
                                           steps.perturber if steps else None))
    records = []
    s = Settings("eoh", budget, ES.population, population=3, seed=0)
    out = Search(prob, proposer, s, FakeEvaluator(), prob.instances("validation", 2), prob.instances("heldout", 2),
                 steps, records.append, log=lambda *_: None).run()
    return out, records, steps, proposer


def test_es_steps_once_per_batch_and_replays_to_the_same_hash(tmp_path):
    model, tok = tiny()
    base = weights_hash(model)
    out, records, steps, proposer = search(model, tok, tmp_path, es=True)
    assert out.calls == 8 and out.es_steps == 2
    hist = History.load(tmp_path / "history.json")
    assert len(hist) == 2 and hist.meta["base_weights_hash"] == base
    # members: antithetic pairs of seeded directions, one per proposal
    members = [r["member"] for r in records]
    assert [m["sign"] for m in members] == [1, -1] * 4
    assert all(members[2 * j]["seed"] == members[2 * j + 1]["seed"] for j in range(4))
    assert [r["rewards"] for r in hist.records] == [[r["reward"] for r in records[:4]],
                                                    [r["reward"] for r in records[4:]]]
    # the directions wrote different replies, so the rewards differ and the weights move
    assert len(set(proposer.texts)) > 1
    assert any(c != 0 for rec in hist.records for c in rec["coefficients"])
    final = weights_hash(model)
    assert final != base and final == hist.records[-1]["weights_hash"] == records[-1]["weights_hash"]
    # replay on a fresh copy of the base model: the same weights, bit for bit
    fresh, _ = tiny()
    assert weights_hash(fresh) == base
    assert hist.replay(make_perturber(fresh, ES)) == 2
    assert weights_hash(fresh) == final


def test_without_es_the_same_batches_leave_the_weights(tmp_path):
    model, tok = tiny()
    base = weights_hash(model)
    out, records, steps, _ = search(model, tok, tmp_path, es=False)
    assert out.calls == 8 and out.es_steps == 0 and steps is None
    assert all(r["member"] is None for r in records)
    assert weights_hash(model) == base and not (tmp_path / "history.json").exists()


def test_without_es_a_batch_of_prompts_is_one_generate_call():
    from esopt.ahd.search import Slot

    model, tok = tiny()
    policy = HFPolicy(model, tok, batch_size=8)
    calls = []
    generate = policy.generate
    policy.generate = lambda convs, *a, **k: calls.append(len(convs)) or generate(convs, *a, **k)
    proposer = ModelProposer(policy, 6, Sampling())
    prompts = ["write a", "write b", "write c", "write d"]
    texts = proposer.propose(prompts, [Slot(i, sample_seed=10 + i) for i in range(4)])
    assert calls == [4] and len(texts) == 4 and all(isinstance(t, str) for t in texts)
    # each reply is its own prompt's: the same prompt alone, greedy, writes the same text
    assert proposer.propose(prompts[2:3], [Slot(2, sample_seed=12)]) == texts[2:3]
    # members under ES still write one by one, each under its own perturbation, in prompt order
    perturber = make_perturber(model, ES)
    mixed = ModelProposer(policy, 6, Sampling(), perturber)
    calls.clear()
    out = mixed.propose(prompts, [Slot(0, 10), Slot(1, 11, seed=5, sign=1, sigma=0.05), Slot(2, 12),
                                  Slot(3, 13, seed=5, sign=-1, sigma=0.05)])
    assert calls == [2, 1, 1] and out[0] == texts[0] and out[2] == texts[2]


def test_lowrank_noise_is_refused(tmp_path):
    model, _ = tiny()
    with pytest.raises(ValueError, match="lowrank"):
        WeightSteps(model, ESConfig(population=4, noise="lowrank"), 0, 2, History(tmp_path / "h.json"))
