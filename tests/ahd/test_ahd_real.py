"""The search on the real TSP problem, in the real sandbox, with scripted replies: an echoed
reference (a duplicate), a worse heuristic, a crashing one and a looping one are each scored
as expected, within the budget, and the best is evaluated once on held-out instances."""
import pytest

from esopt.ahd.evaluate import evaluate
from esopt.ahd.problems import get_problem
from esopt.sandbox.parent import Limits, protections
from esopt.ahd.search import Search, Settings

from ahd_search_fakes import ScriptedProposer

SIG = ("def select_next_node(current_node: int, destination_node: int, unvisited_nodes: np.ndarray, "
       "distance_matrix: np.ndarray) -> int:")
FARTHEST = f"Idea: go far.\n```python\nimport numpy as np\n\n{SIG}\n    d = distance_matrix[current_node, unvisited_nodes]\n    return int(unvisited_nodes[np.argmax(d)])\n```"
ECHO = "```python\n{ref}```"
CRASH = f"```python\n{SIG}\n    return unvisited_nodes[10**9]\n```"
LOOP = f"```python\n{SIG}\n    while True:\n        pass\n```"


@pytest.fixture(scope="module")
def tsp():
    try:
        protections()
    except Exception as err:  # noqa: BLE001
        pytest.skip(f"no sandbox here: {err}")
    return get_problem("tsp")


def test_sample_on_tsp_in_the_sandbox(tsp):
    calls = []
    limits = Limits(cpu_s=2, wall_s=6)

    def ev(problem, code, instances):
        calls.append(len(instances))
        return evaluate(problem, code, instances, limits)

    prop = ScriptedProposer([ECHO.format(ref=tsp.reference), FARTHEST, CRASH, LOOP])
    records = []
    out = Search(tsp, prop, Settings("sample", 4, 4), ev, tsp.instances("validation", 2),
                 tsp.instances("heldout", 3), None, records.append, log=lambda *_: None).run()
    assert out.calls == 4
    echo, far, crash, loop = records
    assert echo["reason"] == "duplicate of ref" and echo["reward"] == -1.0
    assert far["valid"] and far["objective"] > out.reference["objective"] and far["reward"] < 0
    assert not crash["valid"] and crash["reward"] == -1.0 and crash["reason"]
    assert not loop["valid"] and loop["reward"] == -1.0 and loop["reason"]
    assert out.best["id"] == "ref" and out.best["heldout"]["valid"]
    assert calls == [2, 2, 2, 2, 3]  # reference, three distinct children, held-out once
