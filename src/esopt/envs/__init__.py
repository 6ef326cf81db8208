"""Text environments: a small registry plus the Sudoku task."""

from esopt.envs.base import TextEnv
from esopt.envs.registry import list_envs, make, register, register_renderer, renderer_for
from esopt.envs.sudoku import SudokuEnv, SudokuTasks, generate_puzzle, parse_action
from esopt.envs.sudoku_render import render_sudoku_episode
from esopt.envs.web_render import render_web_episode

register("sudoku", SudokuEnv)


def _browsergym_env(**kwargs) -> TextEnv:
    """env.id=browsergym (esopt.envs.web_env); imported on first use: BrowserGym is an optional extra."""
    from esopt.envs.web_env import BrowserGymEnv

    return BrowserGymEnv(**kwargs)


register("browsergym", _browsergym_env)
register_renderer("sudoku", render_sudoku_episode)
register_renderer("browsergym", render_web_episode)

__all__ = ["TextEnv", "make", "register", "list_envs", "register_renderer", "renderer_for", "SudokuEnv", "SudokuTasks",
           "generate_puzzle", "parse_action"]
