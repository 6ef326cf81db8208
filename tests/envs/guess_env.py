"""Guess the number: a TextEnv of one's own, trained by esopt with no edit to esopt.

    env:
      id: guess_env:GuessEnv        # package.module:attr (this file's folder on PYTHONPATH, or the current one)
      max_turns: 6
      options: {high: 8}            # checked by GuessEnv.Options
"""
from __future__ import annotations

import random
import re

from pydantic import BaseModel, ConfigDict, Field

from esopt.envs import TextEnv


class GuessEnv(TextEnv):
    """Find a secret number in 1..high; each guess is answered with higher or lower."""

    class Options(BaseModel):  # env.options, validated: an unknown key or a bad value is one line
        model_config = ConfigDict(extra="forbid")
        high: int = Field(8, ge=2)

    max_turns = 6  # the default turn limit (env.max_turns overrides it; the rollout enforces it)

    def __init__(self, high: int = 8):
        self.high, self.secret, self.last = high, 0, ""

    def reset(self, seed=None):
        self.secret = random.Random(seed).randint(1, self.high)  # a task is a seed
        self.last = f"I picked a number from 1 to {self.high}. Reply with one number."
        return self.last, {}

    def step(self, action):
        found = re.search(r"\d+", action)
        guess = int(found.group()) if found else None
        solved = guess == self.secret
        if guess is None:
            feedback = "No number in your reply."
        else:
            feedback = "Correct!" if solved else ("Higher." if guess < self.secret else "Lower.")
        self.last = feedback
        reward = 1.0 if solved else 0.0
        return feedback, reward, solved, False, {"action": guess, "feedback": feedback, "solved": solved}

    def render_text(self):
        return self.last
