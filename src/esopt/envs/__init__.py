"""Text environments: a small registry plus the Sudoku task."""

from esopt.envs.base import TextEnv
from esopt.envs.registry import list_envs, make, register
from esopt.envs.sudoku import SudokuEnv, SudokuTasks, generate_puzzle, parse_action

register("sudoku", SudokuEnv)

__all__ = ["TextEnv", "make", "register", "list_envs", "SudokuEnv", "SudokuTasks", "generate_puzzle", "parse_action"]
