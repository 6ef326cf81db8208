import math

import numpy as np
import pytest

from esopt.agent.rollout import AgentContext
from esopt.algos.es.coevo.assemble import assemble
from esopt.algos.es.coevo.genome import Draw, Genome
from esopt.algos.es.coevo.library import build_library
from esopt.algos.es.coevo.search import ContextSearch
from esopt.config import ConfigError, build_config
from esopt.es.history import RunFolderError
from esopt.es.shaping import shape
from esopt.es.strategy import Member

SKILLS = [{"name": "A", "text": "alpha"}, {"name": "B", "text": "bravo"}, {"name": "H", "text": "harm"}]
SLOTS = {"strategy": ["", "one", "two"], "examples": [[], [{"role": "user", "content": "ex"}]]}
LIB = build_library(SKILLS, SLOTS, "test")


def search_cfg(mode="context", antithetic=True, **coevo):
    return build_config({"es": {"population": 8, "antithetic": antithetic}, "run": {"seed": 3},
                         "coevo": {"mode": mode, "skills": SKILLS, "slots": SLOTS, **coevo}})


def log_prob(g: Genome, d: Draw) -> float:
    """log p(draw), written out from the definitions (sigmoid per skill, softmax per slot)."""
    total = 0.0
    for x, l in zip(d.skills, g.logits[: g.n_skills]):
        p = 1 / (1 + math.exp(-l))
        total += math.log(p if x else 1 - p)
    for (lo, hi), i in zip(g.bounds, d.slots):
        z = g.logits[lo:hi]
        total += z[i] - math.log(sum(math.exp(v) for v in z))
    return total


def test_sampling_is_deterministic_per_seed_and_varies_across_seeds():
    g = Genome.initial(LIB, 0.5)
    assert g.sample(123) == g.sample(123)
    assert len({g.sample(s) for s in range(40)}) > 10  # 48 possible draws: different seeds differ
    a, b = ContextSearch(search_cfg(), AgentContext()), ContextSearch(search_cfg(), AgentContext())
    members = [Member(k, 0, 1) for k in range(8)]
    assert a.ask(0, members)[0] == b.ask(0, members)[0]
    assert a.ask(0, members)[0] != a.ask(1, members)[0]


def test_sampling_frequencies_match_probabilities():
    g = Genome(LIB, [-1.0, 1.0, 0.0, 0.0, 1.0, 2.0, -0.5, 0.5])
    draws = [g.sample(s) for s in range(4000)]
    skills = np.mean([d.skills for d in draws], axis=0)
    assert np.allclose(skills, g.skill_probs(), atol=0.03)
    for k, p in enumerate(g.slot_probs()):
        freq = np.bincount([d.slots[k] for d in draws], minlength=len(p)) / len(draws)
        assert np.allclose(freq, p, atol=0.03)


def test_grad_log_prob_matches_finite_differences():
    g = Genome(LIB, [0.3, -1.2, 2.0, 0.1, -0.4, 0.9, 0.2, -0.7])
    for d in (Draw((True, False, True), (2, 1)), Draw((False, True, False), (0, 0))):
        num = np.zeros_like(g.logits)
        for j in range(len(g.logits)):
            e = np.zeros_like(g.logits)
            e[j] = 1e-6
            num[j] = (log_prob(Genome(LIB, g.logits + e), d) - log_prob(Genome(LIB, g.logits - e), d)) / 2e-6
        assert np.allclose(g.grad_log_prob(d), num, atol=1e-6)


def toy_reward(ctx: AgentContext) -> float:
    """+1 for skill B, -1 for skill H, +1 for the strategy slot's alternative "one"; A is irrelevant."""
    text = ctx.system_prompt
    return ("## B\nbravo" in text) - ("## H\nharm" in text) + ("## strategy\none" in text)


@pytest.mark.parametrize("mode", ["context", "both"])
def test_logit_update_finds_the_right_skill_and_slot(mode):
    s = ContextSearch(search_cfg(mode), AgentContext(system_prompt="base"))
    members = [Member(k, 0, (-1) ** k) for k in range(8)]
    for t in range(40):
        draws, units, ctxs = s.ask(t, members)
        s.tell(draws, units, shape([toy_reward(c) for c in ctxs], "zscore").tolist())
    p = s.probs()
    assert p["skills"]["B"] > 0.95 and p["skills"]["H"] < 0.05
    assert p["slots"]["strategy"][1] > 0.9
    best, note = s.eval_context()
    assert note["draw"]["skills"].count("B") == 1 and "H" not in note["draw"]["skills"]
    assert toy_reward(best) == 2 and best.system_prompt.startswith("base\n\n# Skills\n\n")


def test_pairs_share_a_draw_only_in_mode_both_with_antithetic():
    members = [Member(k, 0, (-1) ** k) for k in range(8)]
    both = ContextSearch(search_cfg("both"), AgentContext()).ask(0, members)
    assert both[1] == [0, 0, 1, 1, 2, 2, 3, 3] and all(both[0][2 * k] == both[0][2 * k + 1] for k in range(4))
    assert ContextSearch(search_cfg("context"), AgentContext()).ask(0, members)[1] == list(range(8))
    assert ContextSearch(search_cfg("both", antithetic=False), AgentContext()).ask(0, members)[1] == list(range(8))


def test_pair_counts_once_with_its_mean_reward():
    s = ContextSearch(search_cfg("both"), AgentContext())
    d0, d1 = Draw((True, False, False), (0, 0)), Draw((False, True, False), (1, 1))
    g0 = s.genome
    s.tell([d0, d0, d1, d1], [0, 0, 1, 1], [1.0, 0.5, -0.25, -1.25])
    want = g0.logits + 1.0 * (0.75 * g0.grad_log_prob(d0) - 0.75 * g0.grad_log_prob(d1)) / 2
    assert np.allclose(s.genome.logits, want)
    with pytest.raises(ValueError, match="different contexts"):
        s.tell([d0, d1], [0, 0], [1.0, -1.0])


def test_logits_stay_within_the_clip():
    s = ContextSearch(search_cfg(lr=100.0, logit_clip=2.0), AgentContext())
    d = Draw((True, True, True), (1, 1))
    s.tell([d, Draw((False, False, False), (0, 0))], [0, 1], [1.0, -1.0])
    assert np.abs(s.genome.logits).max() == 2.0
    with pytest.raises(ConfigError, match="beyond coevo.logit_clip"):
        ContextSearch(search_cfg(init_prob=0.999, logit_clip=2.0), AgentContext())
    with pytest.raises(ConfigError, match="no skill or slot"):
        ContextSearch(search_cfg(init_logits={"Z": 1.0}), AgentContext())
    with pytest.raises(ConfigError, match="list of 3 numbers"):
        ContextSearch(search_cfg(init_logits={"strategy": [1.0]}), AgentContext())


def test_replay_recomputes_and_checks_the_logits():
    s = ContextSearch(search_cfg("both"), AgentContext())
    members = [Member(k, 0, (-1) ** k) for k in range(8)]
    records = []
    for t in range(4):
        draws, units, ctxs = s.ask(t, members)
        shaped = shape([toy_reward(c) + 0.1 * k for k, c in enumerate(ctxs)], "zscore").tolist()
        records.append({"generation": t, "shaped": shaped, "context": s.tell(draws, units, shaped)})
    fresh = ContextSearch(search_cfg("both"), AgentContext())
    fresh.replay(records)
    assert np.array_equal(fresh.genome.logits, s.genome.logits)
    records[2]["context"]["logits"]["skills"]["A"] += 1e-12
    with pytest.raises(RunFolderError, match="generation 2"):
        ContextSearch(search_cfg("both"), AgentContext()).replay(records)


def test_assemble_places_slots_and_skills():
    base = AgentContext(system_prompt="base prompt", examples=({"role": "user", "content": "base ex"},))
    lib = build_library(SKILLS, {"system_prompt": ["P0", ""], **SLOTS}, "test")
    ctx = assemble(base, lib, Draw((False, True, False), (0, 1, 1)))
    assert ctx.system_prompt == "P0\n\n# Skills\n\n## B\nbravo\n\n## strategy\none"
    assert ctx.examples == ({"role": "user", "content": "ex"},)
    plain = assemble(base, lib, Draw((False, False, False), (1, 0, 0)))
    assert plain.system_prompt == "" and plain.examples == ()
    assert assemble(base, LIB, Draw((False, False, False), (0, 0))) == AgentContext("base prompt", (), "window", 0)


def test_most_likely_treats_float_residue_as_a_tie():
    # the residue an exactly cancelling update leaves (seen in a run: 5.55e-17) neither includes a
    # skill nor picks a slot alternative; a real margin does
    g = Genome(LIB, [5.55e-17, 0.0, 1e-6, 0.0, 1e-17, -1.0, 0.3, 0.3 + 1e-12])
    assert g.most_likely() == Draw((False, False, True), (0, 0))
    g = Genome(LIB, [-1e-3, 2e-3, -5.55e-17, -1.0, 0.5, 0.0, 0.0, 1e-3])
    assert g.most_likely() == Draw((False, True, False), (1, 1))
