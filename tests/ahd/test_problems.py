"""Heuristic-design problems: instances, drivers (called in-process here, no sandbox), objectives."""

import itertools
import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import esopt
from esopt.ahd.problems import (
    PROBLEMS,
    HeuristicError,
    InvalidOutput,
    get_problem,
    load_driver,
)
from esopt.ahd.problems import binpack, knapsack, tsp


def compile_fn(source: str, entry: str):
    namespace: dict = {}
    exec(source, namespace)
    return namespace[entry]


def reference(name: str):
    problem = get_problem(name)
    return compile_fn(problem.reference, problem.entry)


def drive(name: str, fn, instance: dict):
    return load_driver(get_problem(name).driver)(fn, instance)


def score(name: str, instance: dict, fn) -> float:
    return get_problem(name).objective(instance, drive(name, fn, instance))


# ------------------------------------------------------------------ registry and task text


def test_get_problem_gives_each_problem_by_name():
    assert PROBLEMS == ("tsp", "knapsack", "binpack")
    for name in PROBLEMS:
        problem = get_problem(name)
        assert problem.name == name
        assert problem.signature.startswith(f"def {problem.entry}(") and problem.signature.endswith(":")
        assert f"def {problem.entry}(" in problem.reference
        assert f"`{problem.entry}`" in problem.description and "Lower is better" in problem.description
        params = problem.signature[problem.signature.index("(") + 1 : problem.signature.index(")")]
        for param in params.split(","):
            assert param.split(":")[0].strip() in problem.description, (name, param)
        module = sys.modules[f"esopt.ahd.problems.{name}"]
        assert load_driver(problem.driver) is module.run


def test_get_problem_unknown_name_is_one_line_listing_known_names():
    with pytest.raises(ValueError) as err:
        get_problem("cvrp")
    message = str(err.value)
    assert "\n" not in message and "'cvrp'" in message
    assert all(name in message for name in PROBLEMS)


def test_load_driver_rejects_a_malformed_spec():
    with pytest.raises(ValueError, match="package.module:function"):
        load_driver("esopt.ahd.problems.tsp")
    with pytest.raises(ValueError, match="no function 'nope'"):
        load_driver("esopt.ahd.problems.tsp:nope")


def test_problem_modules_import_only_numpy_and_the_standard_library():
    src = str(Path(esopt.__file__).parent.parent)
    code = (
        "import sys\n"
        "import esopt.ahd.problems.tsp, esopt.ahd.problems.knapsack, esopt.ahd.problems.binpack\n"
        "tops = {m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names) - set(sys.builtin_module_names)\n"
        "print(' '.join(sorted(t for t in tops if not t.startswith('_'))))\n"
    )
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert set(out.stdout.split()) == {"esopt", "numpy"}


# ------------------------------------------------------------------ instances


@pytest.mark.parametrize("name", PROBLEMS)
def test_instances_are_deterministic_json_and_prefix_stable(name):
    problem = get_problem(name)
    first = problem.instances("validation", 3, seed=5)
    assert first == problem.instances("validation", 3, seed=5)
    assert json.loads(json.dumps(first)) == first
    assert problem.instances("validation", 2, seed=5) == first[:2]
    assert problem.instances("validation", 3, seed=6) != first
    assert first[0] != first[1]


@pytest.mark.parametrize("name", PROBLEMS)
def test_validation_and_heldout_never_share_an_instance(name):
    problem = get_problem(name)
    keys = {}
    for split in ("validation", "heldout"):
        keys[split] = {json.dumps(x, sort_keys=True) for s in range(3) for x in problem.instances(split, 8, seed=s)}
        assert len(keys[split]) == 24
    assert not keys["validation"] & keys["heldout"]


def test_instances_leave_global_rngs_alone():
    np_state, py_state = np.random.get_state(), random.getstate()
    for name in PROBLEMS:
        get_problem(name).instances("heldout", 2, seed=1)
    after = np.random.get_state()
    assert py_state == random.getstate()
    assert np_state[0] == after[0] and np.array_equal(np_state[1], after[1]) and np_state[2:] == after[2:]


def test_instances_sizes_and_ranges():
    (t,) = get_problem("tsp").instances("validation", 1)
    assert len(t["coords"]) == tsp.N_NODES and all(0 <= v <= 1 for xy in t["coords"] for v in xy)
    (k,) = get_problem("knapsack").instances("validation", 1)
    assert len(k["weights"]) == len(k["values"]) == knapsack.N_ITEMS
    assert all(1 <= v <= knapsack.MAX_SIZE for v in k["weights"] + k["values"])
    assert 0 < k["capacity"] < sum(k["weights"])
    (b,) = get_problem("binpack").instances("validation", 1)
    assert len(b["items"]) == binpack.N_ITEMS and all(1 <= v <= b["capacity"] for v in b["items"])
    assert len(set(b["items"])) > 10


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"split": "train", "n": 2}, "split must be one of 'validation', 'heldout', got 'train'"),
        ({"split": "validation", "n": -1}, "n must be a non-negative int, got -1"),
        ({"split": "validation", "n": 2.0}, "n must be"),
        ({"split": "validation", "n": True}, "n must be"),
        ({"split": "validation", "n": 1, "seed": -3}, "seed must be a non-negative int, got -3"),
    ],
)
def test_instances_reject_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        get_problem("tsp").instances(**kwargs)


# ------------------------------------------------------------------ TSP


def _nearest_neighbour(coords):
    tour, left = [0], set(range(1, len(coords)))
    while left:
        nxt = min(sorted(left), key=lambda j: math.dist(coords[tour[-1]], coords[j]))
        tour.append(nxt)
        left.remove(nxt)
    return tour


def _length(coords, tour):
    return sum(math.dist(coords[a], coords[b]) for a, b in zip(tour, tour[1:] + tour[:1]))


def _follow(tour):
    nxt = {a: b for a, b in zip(tour, tour[1:])}
    return lambda current, destination, unvisited, dist: nxt[current]


def test_tsp_reference_is_nearest_neighbour_and_brute_force_optimum_scores_better():
    for seed in range(20):
        coords = np.random.default_rng(seed).uniform(size=(7, 2)).tolist()
        instance = {"coords": coords}
        tour = drive("tsp", reference("tsp"), instance)
        assert tour == _nearest_neighbour(coords)
        assert get_problem("tsp").objective(instance, tour) == pytest.approx(_length(coords, tour), rel=1e-12)
        best = min(([0, *p] for p in itertools.permutations(range(1, 7))), key=lambda t: _length(coords, t))
        if _length(coords, best) < _length(coords, tour) - 1e-9:
            break
    else:
        pytest.fail("nearest neighbour was optimal on every tiny instance")
    optimal = score("tsp", instance, _follow(best))
    assert optimal == pytest.approx(_length(coords, best)) and optimal < score("tsp", instance, reference("tsp"))


def _two_opt(dist, tour):
    tour, improved = list(tour), True
    while improved:
        improved = False
        for i in range(1, len(tour) - 1):
            for j in range(i + 1, len(tour)):
                a, b, c, d = tour[i - 1], tour[i], tour[j], tour[(j + 1) % len(tour)]
                if dist[a, c] + dist[b, d] < dist[a, b] + dist[c, d] - 1e-12:
                    tour[i : j + 1] = tour[i : j + 1][::-1]
                    improved = True
    return tour


def test_tsp_better_heuristics_score_better_on_default_instances():
    instances = get_problem("tsp").instances("validation", 6)

    def in_index_order(current, destination, unvisited, dist):
        return int(unvisited[0])

    plan: dict = {}

    def nn_then_two_opt(current, destination, unvisited, dist):
        """On a tour's first call, plans nearest neighbour improved by 2-opt; then follows the plan."""
        if len(unvisited) == len(dist) - 1:
            tour, left = [0], set(range(1, len(dist)))
            while left:
                nxt = min(sorted(left), key=lambda j: dist[tour[-1], j])
                tour.append(nxt)
                left.remove(nxt)
            tour = _two_opt(dist, tour)  # keeps city 0 first
            plan.clear()
            plan.update(zip(tour, tour[1:]))
        return plan[current]

    means = {
        fn.__name__: np.mean([score("tsp", x, fn) for x in instances])
        for fn in (in_index_order, reference("tsp"), nn_then_two_opt)
    }
    assert means["nn_then_two_opt"] < means["select_next_node"] < means["in_index_order"]


# ------------------------------------------------------------------ knapsack

# Hand-checked: value/weight greedy packs item 0 (ratio 7/6) and then nothing fits (4 left): value 7.
# Items 1 and 2 fill the knapsack exactly: value 10. LP bound: 7 + (4/5) * 5 = 11.
KNAP = {"weights": [6, 5, 5], "values": [7, 5, 5], "capacity": 10}


def _prefer(order):
    return lambda remaining, weights, values, candidates: next(i for i in order if i in candidates)


def test_knapsack_reference_on_a_hand_checked_instance():
    assert drive("knapsack", reference("knapsack"), KNAP) == [0]
    assert score("knapsack", KNAP, reference("knapsack")) == pytest.approx(100 * (11 - 7) / 11)
    assert score("knapsack", KNAP, _prefer([1, 2, 0])) == pytest.approx(100 * (11 - 10) / 11)


def _greedy(weights, values, capacity):
    chosen, room = [], capacity
    while True:
        fits = [i for i in range(len(weights)) if i not in chosen and weights[i] <= room]
        if not fits:
            return chosen
        best = max(fits, key=lambda i: (values[i] / weights[i], -i))
        chosen.append(best)
        room -= weights[best]


def test_knapsack_reference_matches_an_independent_greedy_and_optimum_scores_no_worse():
    worse = 0
    for seed in range(10):
        instance = knapsack.generate(np.random.default_rng(seed), n_items=9)
        w, v, cap = instance["weights"], instance["values"], instance["capacity"]
        packed = drive("knapsack", reference("knapsack"), instance)
        assert packed == _greedy(w, v, cap)
        subsets = (s for r in range(10) for s in itertools.combinations(range(9), r) if sum(w[i] for i in s) <= cap)
        best = max(subsets, key=lambda s: sum(v[i] for i in s))
        bound = knapsack.lp_bound(w, v, cap)
        assert bound >= sum(v[i] for i in best) - 1e-9
        ref_gap = get_problem("knapsack").objective(instance, packed)
        assert ref_gap == pytest.approx(100 * (bound - sum(v[i] for i in packed)) / bound)
        opt_gap = score("knapsack", instance, _prefer(best))
        assert opt_gap == pytest.approx(100 * (bound - sum(v[i] for i in best)) / bound) and opt_gap <= ref_gap + 1e-12
        worse += opt_gap < ref_gap - 1e-12
    assert worse > 0


def test_knapsack_lowest_value_first_scores_worse_on_default_instances():
    instances = get_problem("knapsack").instances("validation", 6)

    def cheapest(remaining, weights, values, candidates):
        return int(candidates[np.argmin(values[candidates])])

    ref = np.mean([score("knapsack", x, reference("knapsack")) for x in instances])
    assert 0 <= ref < np.mean([score("knapsack", x, cheapest) for x in instances])


# ------------------------------------------------------------------ bin packing

# Hand-checked, capacity 10, items 4 4 6 6: best fit puts both 4s together (2 left), so each 6 opens a bin: 3
# bins. Exact fits only (a new bin otherwise) pairs 4 with 6: 2 bins, the lower bound ceil(20 / 10).
BINS = {"items": [4, 4, 6, 6], "capacity": 10}


def exact_fit_else_new(item, bins):
    return np.where(bins == item, 2.0, np.where(bins == 10, 1.0, 0.0))


def test_binpack_reference_on_a_hand_checked_instance():
    assert drive("binpack", reference("binpack"), BINS) == [0, 0, 1, 2]
    assert score("binpack", BINS, reference("binpack")) == pytest.approx(50.0)
    assert drive("binpack", exact_fit_else_new, BINS) == [0, 1, 0, 1]
    assert score("binpack", BINS, exact_fit_else_new) == 0.0


def _best_fit(items, capacity):
    free, out = [], []
    for item in items:
        fits = [b for b in range(len(free)) if free[b] >= item]
        if fits:
            b = min(fits, key=lambda b: (free[b] - item, b))
        else:
            b = len(free)
            free.append(capacity)
        free[b] -= item
        out.append(b)
    return out


def test_binpack_reference_matches_an_independent_best_fit():
    for seed in range(3):
        instance = binpack.generate(np.random.default_rng(seed), n_items=80)
        packed = drive("binpack", reference("binpack"), instance)
        assert packed == _best_fit(instance["items"], instance["capacity"])
        lower = math.ceil(sum(instance["items"]) / instance["capacity"])
        expected = 100 * (len(set(packed)) - lower) / lower
        assert get_problem("binpack").objective(instance, packed) == pytest.approx(expected)


def test_binpack_a_new_bin_per_item_scores_worse_by_the_known_amount():
    (instance,) = get_problem("binpack").instances("validation", 1)
    lower = math.ceil(sum(instance["items"]) / instance["capacity"])
    always_new = score("binpack", instance, lambda item, bins: np.arange(len(bins), dtype=float))
    assert always_new == pytest.approx(100 * (len(instance["items"]) - lower) / lower)
    assert score("binpack", instance, reference("binpack")) < always_new


# ------------------------------------------------------------------ every problem: valid, JSON, isolated


@pytest.mark.parametrize("name", PROBLEMS)
def test_reference_output_is_json_and_scores_the_same_after_a_round_trip(name):
    problem = get_problem(name)
    for instance in problem.instances("validation", 2):
        output = drive(name, reference(name), instance)
        again = json.loads(json.dumps(output))
        assert again == output and problem.objective(instance, again) == problem.objective(instance, output)
        assert math.isfinite(problem.objective(instance, output))


def _vandal(name):
    """The reference heuristic, but it first checks its inputs are pristine and then wrecks them in place."""
    ref = reference(name)
    calls = []

    def fn(*args):
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        calls.append([a.copy() for a in arrays])
        out = ref(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        for a in arrays:
            a[...] = 0
        return out

    return fn, calls


@pytest.mark.parametrize("name", PROBLEMS)
def test_a_heuristic_that_edits_its_inputs_does_not_change_the_construction(name):
    (instance,) = get_problem(name).instances("validation", 1)
    fn, calls = _vandal(name)
    assert drive(name, fn, instance) == drive(name, reference(name), instance)
    if name == "tsp":
        assert all(np.array_equal(c[1], tsp.distance_matrix(np.array(instance["coords"]))) for c in calls)
    if name == "knapsack":
        assert all(c[0].tolist() == instance["weights"] and c[1].tolist() == instance["values"] for c in calls)


# ------------------------------------------------------------------ bad returns are rejected by the driver


class Hostile:
    """Neither printable nor an index."""

    def __repr__(self):
        raise RuntimeError("no repr")

    def __index__(self):
        raise RuntimeError("no index")


def returning(value):
    return lambda *args: value


def raising(*args):
    return 1 / 0


CHOICE_CASES = [
    (returning(None), "returned None; expected an int"),
    (returning(3.5), "returned 3.5; expected an int"),
    (returning(2.0), "returned 2.0; expected an int"),
    (returning(float("nan")), "returned nan; expected an int"),
    (returning(np.float64(1.0)), r"returned .*float64.*; expected an int"),
    (returning("1"), r"returned '1' \(str\); expected an int"),
    (returning(True), "returned True; expected an int"),
    (returning(np.bool_(True)), "expected an int"),
    (returning([1]), "returned a list of length 1; expected an int"),
    (returning(np.array([1])), r"returned an array of shape \(1,\).*; expected an int"),
    (returning(Hostile()), "returned a value of type Hostile; expected an int"),
    (returning(-1), "returned -1, which is not"),
    (returning(10**6), "returned 1000000, which is not"),
    (returning(10**5000), "returned a value of type int, which is not"),
    (raising, "raised ZeroDivisionError: division by zero"),
    (lambda a, b: 1, "raised TypeError"),  # wrong signature
]


@pytest.mark.parametrize("fn, reason", CHOICE_CASES)
@pytest.mark.parametrize("name", ["tsp", "knapsack"])
def test_a_bad_choice_ends_the_construction_with_a_clear_reason(name, fn, reason):
    (instance,) = get_problem(name).instances("validation", 1)
    with pytest.raises(HeuristicError, match=reason) as err:
        drive(name, fn, instance)
    message = str(err.value)
    assert message.startswith(get_problem(name).entry) and "\n" not in message and len(message) < 300


def test_tsp_a_visited_city_is_rejected():
    instance = {"coords": [[0, 0], [1, 0], [1, 1], [0, 1]]}
    with pytest.raises(HeuristicError, match="select_next_node returned 0, a city already visited"):
        drive("tsp", returning(0), instance)
    with pytest.raises(HeuristicError, match="returned 1, a city already visited"):
        drive("tsp", returning(np.int64(1)), instance)  # a numpy int is fine the first time


def test_knapsack_a_packed_or_too_heavy_item_is_rejected():
    with pytest.raises(HeuristicError, match="select_next_item returned 1, an item already packed"):
        drive("knapsack", returning(1), KNAP)
    with pytest.raises(HeuristicError, match=r"returned 1, which does not fit \(weight 5 > remaining capacity 4\)"):
        drive("knapsack", lambda r, w, v, c: 0 if r == 10 else 1, {**KNAP, "weights": [6, 5, 3]})


SCORE_CASES = [
    (returning(None), "returned None; expected a numeric array"),
    (returning(1.0), r"returned 1.0; expected an array of shape \(1,\)"),
    (returning(np.zeros(5)), r"returned an array of shape \(5,\); expected an array of shape \(1,\)"),
    (returning(np.zeros((1, 1))), r"returned an array of shape \(1, 1\)"),
    (returning(np.array([np.nan])), "returned NaN at index 0"),
    (returning(["1"]), "expected a numeric array"),
    (returning(np.array([None])), "expected a numeric array"),
    (returning([[1], [2, 3]]), "expected a numeric array"),
    (returning(Hostile()), "expected a numeric array"),
    (raising, "priority raised ZeroDivisionError"),
]


@pytest.mark.parametrize("fn, reason", SCORE_CASES)
def test_binpack_a_bad_score_array_ends_the_construction_with_a_clear_reason(fn, reason):
    with pytest.raises(HeuristicError, match=reason) as err:
        drive("binpack", fn, BINS)  # the first item sees one bin, the new one
    assert str(err.value).startswith("priority") and "\n" not in str(err.value)


def test_binpack_accepts_a_list_and_infinite_scores():
    assert drive("binpack", lambda item, bins: [-(b - item) for b in bins], BINS) == [0, 0, 1, 2]
    assert drive("binpack", lambda item, bins: np.where(bins == 10, -np.inf, 0.0), BINS) == [0, 0, 1, 2]


# ------------------------------------------------------------------ malformed outputs are rejected by the objective

SQUARE = {"coords": [[0, 0], [1, 0], [1, 1], [0, 1]]}
MALFORMED = [
    ("tsp", SQUARE, None, "must be a JSON array of ints, got None"),
    ("tsp", SQUARE, (0, 1, 2, 3), "got a tuple of length 4"),
    ("tsp", SQUARE, {"tour": [0, 1, 2, 3]}, "got a dict"),
    ("tsp", SQUARE, [0, 1, 2], "has 3 entries, expected 4"),
    ("tsp", SQUARE, [0, 1, 2, 3, 0], "has 5 entries, expected 4"),
    ("tsp", SQUARE, [0, 1, 1, 3], "visits city 1 more than once"),
    ("tsp", SQUARE, [0, 1, 2, 4], r"tour\[3\] = 4 is out of range 0..3"),
    ("tsp", SQUARE, [0, 1, 2, -1], "is out of range"),
    ("tsp", SQUARE, [0, 1, 2, 10**5000], r"tour\[3\] = a value of type int is out of range"),
    ("tsp", SQUARE, [0, 1, 2.0, 3], r"tour\[2\] is 2.0, expected an int"),
    ("tsp", SQUARE, [0, True, 2, 3], r"tour\[1\] is True, expected an int"),
    ("tsp", SQUARE, [0, np.int64(1), 2, 3], r"tour\[1\] is .*int64.*, expected an int"),
    ("tsp", SQUARE, [0, "1", 2, 3], "expected an int"),
    ("knapsack", KNAP, [0, 0], "item 0 is packed more than once"),
    ("knapsack", KNAP, [0, 1], "packed weight 11 exceeds the capacity 10"),
    ("knapsack", KNAP, [3], "out of range 0..2"),
    ("knapsack", KNAP, [1.0], "expected an int"),
    ("knapsack", KNAP, "12", "must be a JSON array"),
    ("binpack", BINS, [0, 0, 1], "has 3 entries, expected 4"),
    ("binpack", BINS, [0, 0, 0, 1], "bin 0 holds 14, over the capacity 10"),
    ("binpack", BINS, [0, 1, 0, -1], "out of range"),
    ("binpack", BINS, [0, 1, 0, None], "expected an int"),
]


@pytest.mark.parametrize("name, instance, output, reason", MALFORMED)
def test_objective_rejects_malformed_outputs(name, instance, output, reason):
    with pytest.raises(InvalidOutput, match=reason) as err:
        get_problem(name).objective(instance, output)
    assert "\n" not in str(err.value)


def test_objective_accepts_any_valid_output_not_only_the_drivers():
    assert get_problem("tsp").objective(SQUARE, [0, 2, 1, 3]) == pytest.approx(2 + 2 * math.sqrt(2))
    assert get_problem("knapsack").objective(KNAP, []) == pytest.approx(100.0)
    assert get_problem("binpack").objective(BINS, [3, 1, 1, 3]) == 0.0
