"""One row of a dataset as an episode: the prompt is the first observation, each reply is scored by
the reward function; its feedback (while attempts are left) is the next observation."""
from __future__ import annotations

from typing import Any, Callable

from ..base import TextEnv
from .reward import score


class DatasetEnv(TextEnv):
    """An episode of one row. ``turns`` attempts at most; an episode's reward is its last reply's
    (each step's reward is the change from the previous attempt's, so the rollout's sum is the last
    one's). A reward function that raises fails the episode (RewardError from step)."""

    def __init__(self, prompt: str, row: dict, reward_fn: Callable, reward_name: str = "", turns: int = 1,
                 task: str = ""):
        self.prompt, self.row, self.reward_fn, self.reward_name = prompt, row, reward_fn, reward_name
        self.max_turns, self.task = turns, task
        self.reset()

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.attempts, self.score, self.over = 0, 0.0, False
        self._obs = self.prompt
        return self.prompt, {"task": self.task}

    def step(self, action: str):
        if self.over:
            raise RuntimeError(f"the episode of task {self.task} is over; reset() starts another")
        out = score(self.reward_fn, self.reward_name, action, self.prompt, self.row, self.task)
        self.attempts += 1
        delta, self.score = out.reward - self.score, out.reward
        again = not out.done and out.feedback is not None and self.attempts < self.max_turns
        self.over = not again
        self._obs = out.feedback if again else ""
        info = {"feedback": out.feedback, "solved": out.solved, "record": {"score": out.reward}}
        terminated = out.done or out.feedback is None
        return self._obs, delta, self.over and terminated, self.over and not terminated, info

    def render_text(self) -> str:
        return self._obs
