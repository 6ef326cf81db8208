"""A toy problem for testing the sandbox and the evaluation path (not a benchmark): the heuristic gets
one number and must return a number no smaller; the objective is the sum of what it returns (lower is
better; the best is the sum of the items). Shaped like a Problem from esopt.ahd.problems, so
evaluate() takes it."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def run(fn, instance: dict) -> list:
    """The driver (runs inside the sandbox): one call per item; the raw returns go back unjudged."""
    return [fn(x) for x in instance["items"]]


class ToyInvalid(ValueError):
    """An output the toy objective rejects."""


@dataclass(frozen=True)
class ToyProblem:
    name: str = "toy"
    entry: str = "score_item"
    signature: str = "def score_item(x: float) -> float:"
    description: str = "Return a number no smaller than x; the sum of your numbers is minimised."
    reference: str = "def score_item(x):\n    return x + 1.0\n"
    driver: str = "esopt.ahd.toy:run"

    def instances(self, split: str, n: int, seed: int = 0) -> list[dict]:
        stream = {"validation": 0, "heldout": 1}[split]
        rng = np.random.default_rng([seed, stream])
        return [{"items": [round(float(v), 3) for v in rng.uniform(0, 10, size=5)]} for _ in range(n)]

    def objective(self, instance: dict, output) -> float:
        items = instance["items"]
        if not isinstance(output, list) or len(output) != len(items):
            raise ToyInvalid(f"expected a list of {len(items)} numbers")
        total = 0.0
        for x, y in zip(items, output):
            if isinstance(y, bool) or not isinstance(y, (int, float)) or not math.isfinite(y):
                raise ToyInvalid(f"{y!r:.40} is not a finite number")
            if y < x:
                raise ToyInvalid(f"{y} is below its item {x}")
            total += y
        return total


TOY = ToyProblem()
