"""What every heuristic-design problem is: a task, a driver, instances and an objective.

A :class:`Problem` bundles the task a model reads (``description`` plus the
``signature`` of the function it must write), a reference heuristic written as
a model would write it, the ``driver`` that runs a candidate heuristic on one
instance inside the sandbox, a seeded instance generator and the objective the
parent computes from the driver's raw output. The objective validates that
output in full and raises :class:`InvalidOutput` with a short reason; a
heuristic never reports its own score. Lower is better for every problem.

Instances come from a local numpy Generator seeded by a SeedSequence of
(problem, split, seed, index): the "validation" and "heldout" splits draw from
different streams, instance ``i`` does not depend on how many are asked for,
and no global RNG is touched.

This module and the drivers import only numpy and the standard library (and
``esopt.utils.seeding``, itself standard library only), so the sandbox can
import a driver without pulling in anything else.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from esopt.utils.seeding import derive_seed

PROBLEMS: tuple[str, ...] = ("tsp", "knapsack", "binpack")
SPLITS: tuple[str, ...] = ("validation", "heldout")
DEFAULT_INSTANCES = 16  # instances per evaluation the sizes were chosen for (well under a second each)


class InvalidOutput(ValueError):
    """A driver's raw output is not a valid solution of its instance (raised in the parent)."""


class HeuristicError(ValueError):
    """The candidate heuristic raised, or returned something the driver cannot use (raised in the sandbox)."""


@dataclass(frozen=True)
class Problem:
    name: str  # "tsp" | "knapsack" | "binpack"
    entry: str  # the function the model must define
    signature: str  # the exact def line, with types
    description: str  # task text for the prompt: inputs, return value, what is minimised
    reference: str  # source of a reference heuristic defining `entry`
    driver: str  # "module:function"; run(fn, instance) -> JSON-able raw output, runs inside the sandbox
    generate: Callable[[np.random.Generator], dict] = field(repr=False, compare=False)
    score: Callable[[dict, Any], float] = field(repr=False, compare=False)

    def instances(self, split: str, n: int, seed: int = 0) -> list[dict]:
        """``n`` JSON-able instances of ``split``; instance i depends only on (name, split, seed, i)."""
        check_split(split)
        _check_count("n", n)
        _check_count("seed", seed)
        return [self.generate(instance_rng(self.name, split, seed, i)) for i in range(n)]

    def objective(self, instance: dict, output: Any) -> float:
        """Score of the driver's raw ``output`` on ``instance`` (lower is better); InvalidOutput if it is not valid."""
        return float(self.score(instance, output))


def check_split(split: object) -> str:
    if not isinstance(split, str) or split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(map(repr, SPLITS))}, got {split!r}")
    return split


def _check_count(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a non-negative int, got {value!r}")
    return value


def instance_rng(problem: str, split: str, seed: int, index: int) -> np.random.Generator:
    """The local Generator of one instance: a SeedSequence of (problem, split, seed, index)."""
    stream = derive_seed("esopt.ahd.problems", problem, split)
    return np.random.default_rng(np.random.SeedSequence([stream, seed, index]))


def get_problem(name: str) -> Problem:
    """The problem called ``name`` (one of PROBLEMS)."""
    if not isinstance(name, str) or name not in PROBLEMS:
        raise ValueError(f"unknown problem {name!r}; known problems: {', '.join(PROBLEMS)}")
    return importlib.import_module(f"esopt.ahd.problems.{name}").PROBLEM


def load_driver(spec: str) -> Callable[[Callable, dict], Any]:
    """The driver function named by ``spec`` ("package.module:function")."""
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"driver must look like 'package.module:function', got {spec!r}")
    fn = getattr(importlib.import_module(module), attr, None)
    if not callable(fn):
        raise ValueError(f"driver {spec!r}: module {module} has no function {attr!r}")
    return fn
