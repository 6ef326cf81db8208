"""Online bin packing: a heuristic scores the bins an arriving item fits into.

Instances: ``{"items": [...], "capacity": CAPACITY}`` with N_ITEMS integer
item sizes drawn from a Weibull distribution (shape WEIBULL_SHAPE, scale
WEIBULL_SCALE), rounded and clipped to 1..CAPACITY, as in the FunSearch
bin-packing benchmarks. Items arrive in order; for each one the driver calls
``priority(item, bins)`` with the free capacity of every open bin the item
fits into plus one new empty bin (last), and puts the item into the bin with
the highest score (the first on ties). Its raw output is the bin index of
every item (bins numbered in the order they were opened).

The objective is the excess over the lower bound L = ceil(total size /
capacity) in percent: ``100 * (bins used - L) / L``. It accepts only one bin
index per item with no bin over capacity. Typical scale, measured on 16
validation instances (seed 0): best fit (the reference) 4.91 on average (sd
0.66 across instances); one bin more or less moves an instance by about 0.5.

The objective checks the packing, not that it was built online: code running
in the sandbox can reach the whole instance (e.g. through the driver's frame)
and return an offline packing. Such a packing is still checked in full, so it
can score better than an online one but never pass while invalid.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from esopt.ahd.problems.base import HeuristicError, InvalidOutput, Problem
from esopt.ahd.problems.checks import as_scores, call, int_list

N_ITEMS = 500
CAPACITY = 100
WEIBULL_SHAPE = 3.0
WEIBULL_SCALE = 45.0
ENTRY = "priority"
SIGNATURE = "def priority(item: float, bins: np.ndarray) -> np.ndarray:"

DESCRIPTION = f"""\
Online bin packing. Items arrive one at a time ({N_ITEMS} per instance, sizes between 1 and {CAPACITY}) and \
each must be put at once into a bin of capacity {CAPACITY}: either a bin already in use with enough free space \
left, or a new empty bin. For every arriving item the function `priority` is called with the item's size and the \
free space of each bin the item fits into, and returns one score per bin; the item goes into the bin with the \
highest score (the first one on ties).

Inputs:
- item (float): the size of the arriving item.
- bins (np.ndarray of float, shape (k,), k >= 1): the free space left in each bin the item fits into (every \
entry is >= item). The last entry is always a new empty bin (free space {CAPACITY}); the others are bins \
already in use, in the order they were opened.

Return: np.ndarray of float with shape (k,), one score per entry of bins (a higher score is preferred). NaN, a \
single number or an array of another shape makes the heuristic invalid.

Goal: use as few bins as possible. The score is the excess over a lower bound on the bins needed, \
in percent: 100 * (bins used - L) / L with L = ceil(total size of the items / {CAPACITY}). Lower is better.

The function may use numpy (import numpy as np) and the Python standard library."""

REFERENCE = '''\
import numpy as np


def priority(item: float, bins: np.ndarray) -> np.ndarray:
    """Best fit: prefer the bin that the item leaves with the least free space."""
    return -(bins - item)
'''


def generate(rng: np.random.Generator, n_items: int = N_ITEMS) -> dict:
    sizes = np.rint(WEIBULL_SCALE * rng.weibull(WEIBULL_SHAPE, size=n_items))
    return {"items": np.clip(sizes, 1, CAPACITY).astype(np.int64).tolist(), "capacity": CAPACITY}


def run(fn: Callable, instance: dict) -> list[int]:
    """Pack the items in order into the bins ``fn`` scores highest; raises HeuristicError on a bad score array."""
    items = [int(x) for x in instance["items"]]
    capacity = int(instance["capacity"])
    free = np.zeros(len(items), dtype=np.float64)  # free space of open bins; at most one bin per item
    opened = 0
    assignment: list[int] = []
    for item in items:
        if not 0 < item <= capacity:
            raise ValueError(f"instance item {item} does not fit an empty bin of capacity {capacity}")
        fits = np.flatnonzero(free[:opened] >= item)
        bins = np.append(free[fits], float(capacity))  # a fresh array each call; the new bin last
        scores = as_scores(call(fn, ENTRY, float(item), bins), ENTRY, len(bins))
        pick = int(np.argmax(scores))
        if pick == len(fits):
            target = opened
            free[target] = capacity
            opened += 1
        else:
            target = int(fits[pick])
        free[target] -= item
        assignment.append(target)
    return assignment


def excess(instance: dict, output: Any) -> float:
    """100 * (bins used - L) / L of the packing ``output``; InvalidOutput unless each item has a bin within capacity."""
    items, capacity = instance["items"], instance["capacity"]
    n = len(items)
    bins = int_list(output, "bin assignment", length=n, below=max(n, 1))
    loads: dict[int, int] = {}
    for item, b in zip(items, bins):
        loads[b] = loads.get(b, 0) + item
    full = next((b for b, load in loads.items() if load > capacity), None)
    if full is not None:
        raise InvalidOutput(f"bin {full} holds {loads[full]}, over the capacity {capacity}")
    lower = -(-sum(items) // capacity)
    return 100.0 * (len(loads) - lower) / lower if lower else 0.0


PROBLEM = Problem(
    name="binpack",
    entry=ENTRY,
    signature=SIGNATURE,
    description=DESCRIPTION,
    reference=REFERENCE,
    driver="esopt.ahd.problems.binpack:run",
    generate=generate,
    score=excess,
)
