"""Heuristic-design problems: constructive TSP, 0/1 knapsack, online bin packing (see base.Problem)."""

from esopt.ahd.problems.base import (
    DEFAULT_INSTANCES,
    PROBLEMS,
    SPLITS,
    HeuristicError,
    InvalidOutput,
    Problem,
    get_problem,
    load_driver,
)

__all__ = [
    "DEFAULT_INSTANCES", "PROBLEMS", "SPLITS", "HeuristicError", "InvalidOutput", "Problem", "get_problem",
    "load_driver",
]
