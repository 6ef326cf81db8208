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


class SlowOnCheck(NanSometimes):
    """The pre-run check's step (an empty reply) touches `marker` (if given) and takes a minute; with hang_close,
    close() never returns."""

    def __init__(self, every: int = 2, hang_close: bool = False, marker: str = ""):
        super().__init__(every)
        self.hang_close, self.marker = hang_close, marker

    def step(self, action):
        import time
        from pathlib import Path

        if not action:
            if self.marker:
                Path(self.marker).touch()
            time.sleep(60)
        return super().step(action)

    def close(self):
        import time

        while self.hang_close:
            time.sleep(1)


class SlowReplies(NanSometimes):
    """Each reply's step touches `marker` (once the file's folder exists) and then takes `seconds`: a signal sent
    once the marker exists comes while the env, not the model, is working."""

    def __init__(self, every: int = 2, marker: str = "", seconds: float = 3.0):
        super().__init__(every)
        self.marker, self.seconds = marker, seconds

    def step(self, action):
        import time
        from pathlib import Path

        if action and self.marker:
            Path(self.marker).touch()
            time.sleep(self.seconds)
        return "Done.", min(len(action), 10) / 10, True, False, {}


class LongSometimes(NanSometimes):
    """Every `every`-th task (by its seed) starts with 20,000 characters: under agent.max_observation_chars, past
    a tiny model's 4,096 positions."""

    def reset(self, seed=None):
        self.seed = int(seed or 0)
        return ("x" * 20_000 if self.seed % self.every == 0 else "Say anything."), {}
