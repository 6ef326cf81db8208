"""Constructive 0/1 knapsack: a heuristic picks the next item to pack, one step at a time.

Instances: ``{"weights": [...], "values": [...], "capacity": int}`` with
N_ITEMS items whose integer weights and values are uniform in 1..MAX_SIZE and
a capacity of CAPACITY_SHARE of the total weight. The driver asks
``select_next_item`` for the next item among those not packed that still fit,
until none fits; its raw output is the list of packed items. Integers keep
the capacity check exact on both sides of the sandbox.

The objective is the gap to the LP-relaxation bound (Dantzig's fractional
greedy) in percent, ``100 * (bound - value) / bound``: 0 would be a packing as
good as the bound, and every valid packing scores in [0, 100]. It accepts only
distinct item indices whose total weight is within the capacity. Typical
scale, measured on 16 validation instances (seed 0): value/weight greedy (the
reference) 1.14 on average (sd 0.57 across instances); the optimal packings
(dynamic programming) 0.63, the most any heuristic can gain.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from esopt.ahd.problems.base import HeuristicError, InvalidOutput, Problem
from esopt.ahd.problems.checks import as_choice, call, describe, int_list

N_ITEMS = 50
MAX_SIZE = 100
CAPACITY_SHARE = 0.25
ENTRY = "select_next_item"
SIGNATURE = (
    "def select_next_item(remaining_capacity: int, weights: np.ndarray, "
    "values: np.ndarray, candidate_items: np.ndarray) -> int:"
)

DESCRIPTION = f"""\
0/1 knapsack problem, packed one item at a time. There are N items ({N_ITEMS} in every instance); item i has an \
integer weight weights[i] and an integer value values[i] (both between 1 and {MAX_SIZE}). The knapsack holds a \
total weight of at most its capacity (about {CAPACITY_SHARE:.0%} of the total weight of all items). At each step \
the function `select_next_item` is called and must choose the next item to pack among the items that are not \
packed yet and still fit; packing goes on until no item fits.

Inputs:
- remaining_capacity (int): the capacity left in the knapsack.
- weights (np.ndarray of int, shape (N,)): the weights of all N items.
- values (np.ndarray of int, shape (N,)): the values of all N items.
- candidate_items (np.ndarray of int, shape (k,), k >= 1): the indices of the items not packed yet whose weight \
is at most remaining_capacity, in increasing order.

Return: one element of candidate_items, as an int. Any other return value (a packed item, an item that does \
not fit, a float, None) makes the heuristic invalid.

Goal: maximise the total value of the packed items. The score is the relative gap between an upper bound on the \
best possible value (the fractional relaxation) and the packed value, in percent: 100 * (bound - value) / bound. \
Lower is better.

The function may use numpy (import numpy as np) and the Python standard library."""

REFERENCE = '''\
import numpy as np


def select_next_item(remaining_capacity: int, weights: np.ndarray, values: np.ndarray, candidate_items: np.ndarray) -> int:
    """Greedy: pack the fitting item with the highest value per unit of weight."""
    ratios = values[candidate_items] / weights[candidate_items]
    return int(candidate_items[np.argmax(ratios)])
'''


def generate(rng: np.random.Generator, n_items: int = N_ITEMS) -> dict:
    weights = rng.integers(1, MAX_SIZE, size=n_items, endpoint=True)
    values = rng.integers(1, MAX_SIZE, size=n_items, endpoint=True)
    capacity = max(1, int(CAPACITY_SHARE * int(weights.sum())))
    return {"weights": weights.tolist(), "values": values.tolist(), "capacity": capacity}


def run(fn: Callable, instance: dict) -> list[int]:
    """Pack items chosen by ``fn`` until none fits; raises HeuristicError on a bad choice."""
    weights = np.asarray(instance["weights"], dtype=np.int64)
    values = np.asarray(instance["values"], dtype=np.int64)
    remaining = int(instance["capacity"])
    n = len(weights)
    packed = np.zeros(n, dtype=bool)
    chosen: list[int] = []
    while True:
        candidates = np.flatnonzero(~packed & (weights <= remaining))
        if candidates.size == 0:
            return chosen
        # fresh copies each call: a heuristic that edits its inputs cannot change the driver's state
        choice = as_choice(call(fn, ENTRY, remaining, weights.copy(), values.copy(), candidates), ENTRY)
        if not 0 <= choice < n:
            raise HeuristicError(f"{ENTRY} returned {describe(choice)}, which is not an item (items are 0..{n - 1})")
        if packed[choice]:
            raise HeuristicError(f"{ENTRY} returned {choice}, an item already packed")
        if weights[choice] > remaining:
            raise HeuristicError(
                f"{ENTRY} returned {choice}, which does not fit (weight {int(weights[choice])} > "
                f"remaining capacity {remaining})"
            )
        packed[choice] = True
        chosen.append(choice)
        remaining -= int(weights[choice])


def lp_bound(weights: list[int], values: list[int], capacity: int) -> float:
    """Dantzig's bound: items by value/weight, whole while they fit, then a fraction of the next one."""
    order = sorted(range(len(weights)), key=lambda i: values[i] / weights[i], reverse=True)
    bound, room = 0.0, capacity
    for i in order:
        if weights[i] <= room:
            bound += values[i]
            room -= weights[i]
        else:
            return bound + values[i] * room / weights[i]
    return bound


def gap(instance: dict, output: Any) -> float:
    """100 * (bound - value) / bound of the packing ``output``; InvalidOutput unless it is distinct items within capacity."""
    weights, values, capacity = instance["weights"], instance["values"], instance["capacity"]
    n = len(weights)
    items = int_list(output, "packed items", below=n)
    if len(set(items)) != len(items):
        repeated = next(i for i in items if items.count(i) > 1)
        raise InvalidOutput(f"item {repeated} is packed more than once")
    load = sum(weights[i] for i in items)
    if load > capacity:
        raise InvalidOutput(f"packed weight {load} exceeds the capacity {capacity}")
    bound = lp_bound(weights, values, capacity)
    if bound <= 0:
        return 0.0
    return 100.0 * (bound - sum(values[i] for i in items)) / bound


PROBLEM = Problem(
    name="knapsack",
    entry=ENTRY,
    signature=SIGNATURE,
    description=DESCRIPTION,
    reference=REFERENCE,
    driver="esopt.ahd.problems.knapsack:run",
    generate=generate,
    score=gap,
)
