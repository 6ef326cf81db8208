"""Envs that misbehave as a user's env might (tests/train/test_failures.py): a reward that is NaN on some
tasks or on all of them, a reward that is not a number."""
from __future__ import annotations

from esopt.envs.base import TextEnv


class NanSometimes(TextEnv):
    """One turn; the reward is NaN on every `every`-th task (by its seed) when the reply is not empty, else the
    reply's length share (an empty reply, as the preflight's, scores 0)."""

    max_turns = 1

    def __init__(self, every: int = 2):
        self.every, self.seed = every, 0

    def reset(self, seed=None):
        self.seed = int(seed or 0)
        return "Say anything.", {}

    def step(self, action):
        reward = float("nan") if self.seed % self.every == 0 and action else min(len(action), 10) / 10
        return "Done.", reward, True, False, {}

    def render_text(self) -> str:
        return "Say anything."


class NoneReward(NanSometimes):
    def step(self, action):
        return "Done.", None, True, False, {}


class RaisesInInit(NanSometimes):
    def __init__(self, every: int = 2):
        raise RuntimeError("cannot open the task file")


class ResetReturnsDict(NanSometimes):
    def reset(self, seed=None):
        return {"observation": "Say anything."}


class NoneRewardForReplies(NanSometimes):
    """None as the reward of any reply but the empty one (which the preflight sends)."""

    def step(self, action):
        return "Done.", (None if action else 0.0), True, False, {}


class TakesAnything(NanSometimes):
    """A factory that takes **kwargs: env.options keys it does not name are warned about."""

    def __init__(self, every: int = 2, **kwargs):
        super().__init__(every)


class FewTasks(NanSometimes):
    """Six different tasks whatever the seed (a class attribute declares it): splits larger than that share tasks."""

    distinct_tasks = 6


class TasksByOption(NanSometimes):
    """As many different tasks as its `every` option says (declared as a function of the options)."""

    @staticmethod
    def distinct_tasks(every: int = 2, **_):
        return every


class HangsSometimes(NanSometimes):
    """NanSometimes, but its step never returns (where that one answered NaN): run.call_timeout_s stops it."""

    def step(self, action):
        import time

        while self.seed % self.every == 0 and action:
            time.sleep(1)
        return "Done.", min(len(action), 10) / 10, True, False, {}


class HangsOnCheck(NanSometimes):
    """A step that never returns, even for the pre-run check's empty reply."""

    def step(self, action):
        import time

        while True:
            time.sleep(1)


class HugeReset(NanSometimes):
    """reset returns a megabyte of text."""

    def reset(self, seed=None):
        return "x" * (1 << 20), {}
