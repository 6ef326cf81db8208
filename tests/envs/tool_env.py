"""A tool-using env of one's own (tests/envs/test_tool_env.py): a product to compute, a `multiply` tool
and a `digits` tool; the answer is the reply's last number. Tasks are seeds of reset."""
from __future__ import annotations

import random
import re

from esopt.envs import TextEnv


class ProductEnv(TextEnv):
    max_turns = 3

    def __init__(self, digits: int = 3):
        self.digits = digits
        self.a = self.b = 0

    def reset(self, seed=None):
        rng = random.Random(seed)
        lo, hi = 10 ** (self.digits - 1), 10 ** self.digits - 1
        self.a, self.b = rng.randint(lo, hi), rng.randint(lo, hi)
        return f"What is {self.a} * {self.b}?", {}

    def multiply(self, x: int, y: int) -> int:
        """Multiply two integers.

        Args:
            x: the first factor
            y: the second factor
        """
        return x * y

    def digits_of(self, n: int) -> list:
        """The decimal digits of a number.

        Args:
            n: the number
        """
        return [int(d) for d in str(abs(n))]

    def tools(self):
        return [self.multiply, self.digits_of]

    def step(self, action):
        numbers = re.findall(r"-?\d+", action)
        ok = bool(numbers) and int(numbers[-1]) == self.a * self.b
        return "", float(ok), True, False, {"solved": ok}

    def render_text(self):
        return f"What is {self.a} * {self.b}?"


class UndocumentedEnv(ProductEnv):
    def add(self, x: int, y: int) -> int:
        return x + y

    def tools(self):
        return [self.add]
