"""env.id=vowels: a one-turn toy task that even a tiny random model scores on by chance, so a few
ES generations visibly move its reward (configs/smoke.yaml, the one-minute check of an install).
The reward is the share of the reply's characters that are vowels (a, e, i, o, u)."""
from __future__ import annotations

import random

from .base import TextEnv

VOWELS = set("aeiouAEIOU")
WORDS = ("river", "stone", "cloud", "lamp", "garden", "window", "orange", "music")


class VowelsEnv(TextEnv):
    """Reply with any text; reward = vowels / characters of the reply (0 for an empty reply)."""

    max_turns = 1

    def __init__(self):
        self.prompt = ""

    def reset(self, seed=None):
        word = random.Random(seed).choice(WORDS)  # a task is a seed: a word to start from
        self.prompt = f"Write a few letters inspired by '{word}'. Vowels score."
        return self.prompt, {}

    def step(self, action):
        text = action.strip()
        reward = sum(c in VOWELS for c in text) / len(text) if text else 0.0
        return "Done.", reward, True, False, {"action": text[:40], "solved": reward >= 0.5}

    def render_text(self):
        return self.prompt
