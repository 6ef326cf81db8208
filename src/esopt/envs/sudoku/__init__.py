"""Sudoku: the env (env.py), puzzles and splits (puzzles.py), reading moves (moves.py), the report
renderer (render.py) and its spec for the harness (spec.py: env.id=sudoku)."""

from esopt.envs.sudoku.env import *  # noqa: F401,F403
from esopt.envs.sudoku.env import __all__ as _env_all
from esopt.envs.sudoku.env import _search  # noqa: F401  (older code imports it from here)

__all__ = list(_env_all)
