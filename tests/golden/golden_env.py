"""An env whose reward is graded by the reply's text, so a tiny random model's episodes differ in
reward from member to member and every generation makes a real update (the golden records)."""
from __future__ import annotations

import random

from esopt.envs import TextEnv


class Letters(TextEnv):
    """Each turn asks for a letter; the reward is the share of distinct characters of the reply that
    are in the task's target set (a seed), summed over turns and divided by the turn limit."""

    max_turns = 2

    def __init__(self):
        self.target, self.turn, self.last = "", 0, ""

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.target = "".join(rng.sample("abcdefghijklmnopqrstuvwxyz0123456789", 12))
        self.turn = 0
        return f"Say letters from {self.target}.", {}

    def step(self, action):
        self.turn += 1
        chars = set(action)
        reward = len(chars & set(self.target)) / (len(chars) or 1) / self.max_turns
        done = self.turn >= self.max_turns
        self.last = f"Turn {self.turn}: again."
        return self.last, reward, done, False, {"action": action[:20], "solved": False}

    def render_text(self):
        return self.last
