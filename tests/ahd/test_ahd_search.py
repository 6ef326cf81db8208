"""The search loop with scripted proposers: budgets, duplicates, garbage, rewards, best-so-far,
one held-out evaluation of the best; the operator plan and rank selection."""
import numpy as np
import pytest

from esopt.ahd.search import Heuristic, Search, Settings, operator_plan, rank_select, reward_of

from ahd_search_fakes import BAD, CRASH, GARBAGE, GOOD, UNPARSEABLE, FakeEvaluator, ScriptedProposer, ToyProblem, const


def run(texts, method="eoh", budget=16, batch=4, population=4, **kw):
    prob, ev, prop = ToyProblem(), FakeEvaluator(), ScriptedProposer(texts)
    records = []
    s = Settings(method, budget, batch, population, seed=kw.pop("seed", 0), **kw)
    search = Search(prob, prop, s, ev, prob.instances("validation", 3), prob.instances("heldout", 5), None,
                    records.append, log=lambda *_: None)
    return search.run(), records, ev, prop, search


def test_settings_refuse_a_budget_that_is_not_whole_batches():
    with pytest.raises(ValueError, match="multiple of the batch"):
        Settings("eoh", 10, 4)
    with pytest.raises(ValueError, match="unknown search method"):
        Settings("gp", 8, 4)


def test_operator_plan():
    assert operator_plan(Settings("eoh", 24, 4, population=4)) == ["e1", "e1", "e2", "m1", "m2", "e1"]
    assert operator_plan(Settings("eoh", 8, 2, population=5)) == ["e1", "e1", "e1", "e2"]
    assert operator_plan(Settings("sample", 12, 4)) == ["sample"] * 3


@pytest.mark.parametrize("method", ["eoh", "sample"])
def test_garbage_and_duplicates_use_up_the_budget_and_terminate(method):
    texts = [GARBAGE, UNPARSEABLE, CRASH, GOOD[0], GOOD[0], const(4.0, "the same code, commented"), BAD, GARBAGE]
    out, records, ev, prop, _ = run(texts, method=method, budget=24)
    assert out.calls == 24 == len(records) == len(prop.prompts)
    assert [r["index"] for r in records] == list(range(24))
    reasons = [r["reason"] or "" for r in records]
    assert sum("no 'def entry('" in x for x in reasons) == 6  # GARBAGE: 2 of every 8
    assert sum("unparseable" in x for x in reasons) == 3
    assert sum("ZeroDivisionError" in x for x in reasons[:8]) == 1  # evaluated once, then a duplicate
    assert sum(x.startswith("duplicate") for x in reasons) == out.counts["duplicate"] > 0
    assert out.counts["valid"] == 2  # 4.0 and 9.0, once each; every later copy is a duplicate
    assert all(not r["valid"] for r in records if r["reason"])
    # validation evaluations: the reference and each distinct parseable code once; held-out once
    splits = [c[1] for c in ev.calls]
    assert splits.count("heldout") == 1 and splits[-1] == "heldout"
    assert splits.count("validation") == 1 + 3


def test_rewards_parent_minus_child_and_minus_one_for_invalid():
    out, records, *_ = run([GOOD[3], GOOD[3], GARBAGE, BAD], method="sample", budget=4)
    ref = 5.0
    assert records[0]["parent_objective"] == ref and records[0]["reward"] == pytest.approx(ref - 2.0)
    assert records[1]["reward"] == records[0]["reward"]  # the pair's twin: same code, same reward
    assert "same batch" in records[1]["reason"]
    assert records[2]["reward"] == -1.0
    assert records[3]["reward"] == pytest.approx(ref - 9.0) and records[3]["valid"]
    assert reward_of(4.0, 3.0, Settings("eoh", 4, 4, reward="relative")) == pytest.approx(0.25)
    out2, rec2, *_ = run([GOOD[3], GARBAGE, GARBAGE, GARBAGE], method="sample", budget=8)
    assert rec2[4]["reason"] == "duplicate of p0" and rec2[4]["reward"] == -1.0  # a later batch: -1


def test_eoh_improves_keeps_population_and_held_out_is_the_best_once():
    out, records, ev, prop, search = run(GOOD + [BAD], budget=32, population=3)
    best = [r["best_so_far"] for r in records]
    assert all(b2 <= b1 for b1, b2 in zip(best, best[1:]))  # monotone
    assert best[-1] == min(r["objective"] for r in records if r["valid"]) == out.best["objective"]
    assert out.best["objective"] < 5.0 and out.best["id"].startswith("p")
    held = [c for c in ev.calls if c[1] == "heldout"]
    assert len(held) == 1 and held[0][0] == out.best["code"] and held[0][2] == 5
    assert out.best["heldout"]["valid"] and out.best["heldout"]["objective"] == out.best["objective"]
    assert len(out.population) == 3
    assert [p["objective"] for p in out.population] == sorted(p["objective"] for p in out.population)
    # parents are population members with their objectives; operators follow the plan
    ops = [r["operator"] for r in records]
    assert ops[:8] == ["e1"] * 8 and ops[8:12] == ["e2"] * 4 and ops[12:16] == ["m1"] * 4  # init, then e1 e2 m1 m2
    for r in records:
        assert len(r["parents"]) == len(r["parent_objectives"]) >= 1
        if r["operator"] in ("m1", "m2"):
            assert len(r["parents"]) == 1 and r["parent_objective"] == r["parent_objectives"][0]
        if r["operator"] == "e2":
            assert r["parent_objective"] == min(r["parent_objectives"])
    # an antithetic pair shares its prompt
    assert all(prop.prompts[2 * j] == prop.prompts[2 * j + 1] for j in range(16))
    assert all(r["member"] is None for r in records)


def test_nothing_valid_keeps_the_reference_as_best():
    out, records, ev, *_ = run([GARBAGE, UNPARSEABLE], budget=8)
    assert out.best["id"] == "ref" and out.best["objective"] == 5.0 and out.counts["valid"] == 0
    assert [c[1] for c in ev.calls] == ["validation", "heldout"]


def test_same_seed_same_run_other_seed_other_decoding_seeds():
    a, b, c = (run(GOOD, budget=24, seed=s) for s in (1, 1, 2))
    assert [r["parents"] for r in a[1]] == [r["parents"] for r in b[1]] and a[3].slots == b[3].slots
    assert [s.sample_seed for s in a[3].slots] != [s.sample_seed for s in c[3].slots]
    assert len({s.sample_seed for s in a[3].slots}) == 24  # without ES every call decodes with its own seed


def test_rank_select_prefers_the_best_and_returns_distinct():
    pop = [Heuristic(f"h{i}", "", float(i), None, str(i)) for i in range(5)]
    rng = np.random.default_rng(0)
    firsts = [rank_select(pop, 1, rng)[0].id for _ in range(2000)]
    assert firsts.count("h0") > firsts.count("h1") > firsts.count("h4")
    two = rank_select(pop, 2, rng)
    assert len({h.id for h in two}) == 2
    assert len(rank_select(pop[:1], 3, rng)) == 1


def test_report_curve_is_the_best_so_far_from_the_reference():
    from esopt.report.ahd import best_so_far

    out, records, *_ = run(GOOD + [BAD], budget=16)
    xs, ys = best_so_far(records, out.reference["objective"])
    assert xs[0] == 0 and ys[0] == 5.0 and xs[-1] == 16
    assert all(b <= a for a, b in zip(ys, ys[1:])) and ys[-1] == out.best["objective"]
    assert ys[1:] == [r["best_so_far"] for r in records]


def test_an_evaluator_that_raises_makes_the_child_invalid_and_the_search_goes_on():
    prob, prop, records = ToyProblem(), ScriptedProposer([GOOD[0], GOOD[1]]), []
    inner = FakeEvaluator()

    def flaky(problem, code, instances):
        if "4.0" in code:
            raise OSError("sandbox broke")
        return inner(problem, code, instances)

    out = Search(prob, prop, Settings("sample", 4, 4), flaky, prob.instances("validation", 2),
                 prob.instances("heldout", 2), None, records.append, log=lambda *_: None).run()
    assert records[0]["reason"] == "evaluator error: OSError: sandbox broke" and records[0]["reward"] == -1.0
    assert out.best["objective"] == 3.0 and out.calls == 4


def test_bounded_reward_ranks_every_valid_child_above_an_invalid_one():
    st = Settings("eoh", 4, 4, reward="bounded")
    assert reward_of(4.0, 3.0, st) == pytest.approx(1.0 / 5.0) and reward_of(4.0, 4.0, st) == 0.0
    assert reward_of(4.0, 3.0, st) > reward_of(4.0, 3.5, st) > 0 > reward_of(4.0, 5.0, st)  # monotone
    invalid = reward_of(1.14, None, st)
    assert invalid == -1.0
    for child in (1.2, 54.2, 1e6, 1e300):  # however much worse, still above an invalid child
        assert invalid < reward_of(1.14, child, st) < 0
    assert 0 < reward_of(0.0, -1e-3, st) <= 1 and -1 <= reward_of(0.0, 5.0, st) < 0  # a zero parent objective
    with pytest.raises(ValueError, match="allowed: absolute, relative, bounded"):
        Settings("eoh", 4, 4, reward="ranked")
