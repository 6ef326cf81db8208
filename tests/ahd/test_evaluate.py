"""evaluate(): the objective is computed in the parent from the sandbox's raw outputs, so no candidate can
report its own score; rejected outputs and sandbox failures are invalid with their reason."""
import textwrap

import pytest

from esopt.sandbox import parent as sandbox
from esopt.ahd.evaluate import evaluate
from esopt.sandbox.parent import Limits
from esopt.ahd.toy import TOY, ToyProblem

FAST = Limits(cpu_s=1, wall_s=3, memory_mb=512, output_kb=64)
INST = [{"items": [1.0, 2.0, 3.5]}, {"items": [0.5]}]


@pytest.fixture(scope="module", autouse=True)
def _available():
    prot = sandbox.protections()
    if not prot.get("available"):
        pytest.skip(f"sandbox unavailable on this machine: {prot.get('refusal')}")


def ev(code, problem=TOY, instances=INST):
    return evaluate(problem, textwrap.dedent(code), instances, FAST)


def test_good_heuristic_scores_its_true_objective():
    e = ev("def score_item(x):\n    return x + 1\n")
    assert e.valid and e.reason is None
    assert e.per_instance == [1 + 2 + 3.5 + 3, 0.5 + 1]
    assert e.objective == pytest.approx((9.5 + 1.5) / 2)
    assert e.wall_s > 0


def test_reference_is_valid_and_better_is_lower():
    ref = ev(TOY.reference)
    tight = ev("def score_item(x):\n    return x\n")
    assert ref.valid and tight.valid and tight.objective < ref.objective


def test_invalid_output_is_invalid_with_reason():
    e = ev("def score_item(x):\n    return x - 1\n")
    assert not e.valid and e.objective is None and e.per_instance is None
    assert e.reason == "invalid output: 0.0 is below its item 1.0 (instance 0)"
    assert ev("def score_item(x):\n    return float('nan')\n").reason == "invalid output: nan is not a finite number (instance 0)"
    assert ev("def score_item(x):\n    return 'cheap'\n").reason.startswith("invalid output: 'cheap' is not a finite")


def test_sandbox_failure_passes_its_reason():
    e = ev("def score_item(x):\n    return 1 / 0\n")
    assert not e.valid and e.reason == "crash: ZeroDivisionError: division by zero (line 2)"


def test_objective_errors_are_invalid_not_fatal():
    class Broken(ToyProblem):
        def objective(self, instance, output):
            return output["score"]  # a careless objective: TypeError on a list

    e = evaluate(Broken(), "def score_item(x):\n    return x\n", INST, FAST)
    assert not e.valid and e.reason.startswith("invalid output: TypeError: list indices"), e.reason


def test_monkeypatching_the_evaluator_changes_nothing_here():
    """A candidate patches the driver, the objective and evaluate() itself inside the child to fake a
    perfect score; the parent's objective is computed from what the driver actually returned."""
    e = ev("""
        import esopt.ahd.toy as toy
        import esopt.ahd.evaluate as evaluate_module
        toy.ToyProblem.objective = lambda self, instance, output: -1e9
        toy.run = lambda fn, instance: [0.0 for _ in instance["items"]]
        evaluate_module.evaluate = lambda *a, **k: "perfect"
        def score_item(x):
            return x + 5
    """)
    assert e.valid, e.reason
    assert e.per_instance == [1 + 2 + 3.5 + 15, 0.5 + 5]
    assert TOY.objective({"items": [1.0]}, [1.0]) == 1.0  # our copy is untouched


def test_forged_result_is_judged_by_the_parent():
    e = ev("""
        import json
        json.dumps = lambda *a, **k: '{"ok": true, "outputs": [[0, 0, 0], [0]]}'
        def score_item(x):
            return x
    """)
    assert not e.valid and e.reason == "invalid output: 0 is below its item 1.0 (instance 0)"


def test_empty_instances_are_a_caller_error():
    with pytest.raises(ValueError, match="at least one instance"):
        evaluate(TOY, TOY.reference, [], FAST)


@pytest.mark.parametrize("name", ["tsp", "knapsack", "binpack"])
def test_real_problems_through_the_sandbox(name):
    """The problems' drivers run in the sandbox: the reference is valid, a raising heuristic and a wrong
    return type are named (the drivers' HeuristicError becomes crash / invalid output)."""
    problems = pytest.importorskip("esopt.ahd.problems")
    p = problems.get_problem(name)
    instances = p.instances("validation", 2)
    ref = evaluate(p, p.reference, instances, Limits(cpu_s=5, wall_s=10, memory_mb=512))
    assert ref.valid and ref.objective == pytest.approx(sum(p.objective(i, o) for i, o in zip(
        instances, sandbox.run_candidate(p.reference, p.entry, p.driver, instances).outputs)) / 2), ref.reason
    crash = evaluate(p, p.signature + "\n    return 1 / 0\n", instances, FAST)
    assert crash.reason == f"crash: {p.entry} raised ZeroDivisionError: division by zero (line 2)"
    wrong = evaluate(p, p.signature + "\n    return 'x'\n", instances, FAST)
    assert wrong.reason.startswith(f"invalid output: {p.entry} returned 'x' (str)"), wrong.reason
