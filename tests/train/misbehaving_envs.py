"""Envs that misbehave as a user's env might (tests/train/test_failures.py): a reward that is NaN on some
tasks or on all of them, a reward that is not a number."""
from __future__ import annotations

from esopt.envs.base import TextEnv


class NanSometimes(TextEnv):
    """One turn; the reward is NaN on every `every`-th task (by its seed), else the reply's length share."""

    max_turns = 1

    def __init__(self, every: int = 2):
        self.every, self.seed = every, 0

    def reset(self, seed=None):
        self.seed = int(seed or 0)
        return "Say anything.", {}

    def step(self, action):
        reward = float("nan") if self.seed % self.every == 0 else min(len(action), 10) / 10
        return "Done.", reward, True, False, {}

    def render_text(self) -> str:
        return "Say anything."


class NoneReward(NanSometimes):
    def step(self, action):
        return "Done.", None, True, False, {}
