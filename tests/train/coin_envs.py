"""A one-turn env whose success is a coin a reply's bytes throw (tests/train/test_pass_at.py): a task is solved
when the sum of the reply's UTF-8 bytes is congruent to its seed modulo 3, so sampled replies of a random tiny
model solve some attempts of a task and not others, and greedy ones always give the same answer."""
from __future__ import annotations

from esopt.envs.base import TextEnv


class Coin(TextEnv):
    max_turns = 1

    def __init__(self):
        self.seed = 0

    def reset(self, seed=None):
        self.seed = int(seed or 0)
        return "Say anything.", {}

    def step(self, action):
        solved = sum(action.encode("utf-8")) % 3 == self.seed % 3
        return "Done.", float(solved), True, False, {"solved": solved}

    def render_text(self) -> str:
        return "Say anything."
