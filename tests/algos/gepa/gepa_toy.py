"""A toy agent whose Sudoku play depends on its system prompt, and scripted reflection LMs."""
from __future__ import annotations

import re


def board(observation: str) -> list[list[int]]:
    rows = [line.split("|", 1)[1] for line in observation.splitlines() if re.match(r"r\d+ \|", line)]
    return [[0 if v == "." else int(v) for v in re.findall(r"[1-9.]", row)] for row in rows]


def good_move(observation: str) -> str:
    """A move whose digit is the only one the cell's row, column and box leave."""
    g = board(observation)
    n = len(g)
    b = int(round(n ** 0.5))
    for r in range(n):
        for c in range(n):
            if g[r][c]:
                continue
            r0, c0 = r // b * b, c // b * b
            used = set(g[r]) | {g[i][c] for i in range(n)} | {g[i][j] for i in range(r0, r0 + b) for j in range(c0, c0 + b)}
            left = [d for d in range(1, n + 1) if d not in used]
            if len(left) == 1:
                return f"r{r + 1}c{c + 1}={left[0]}"
    return "r1c1=1"


def first_blank_row(observation: str) -> int:
    return next(r for r, row in enumerate(board(observation)) if 0 in row)


class ToyPolicy:
    """Plays good moves when its system prompt holds MAGIC; without it only on puzzles whose first
    blank lies in an even-indexed row (so the configured prompt scores between 0 and 1)."""

    def __init__(self):
        self.tokens_generated = 0
        self.calls = 0

    def generate(self, conversations, options, **kwargs):
        self.calls += 1
        out = []
        for conv in conversations:
            system = conv[0]["content"] if conv[0]["role"] == "system" else ""
            obs = conv[-1]["content"]
            ok = "MAGIC" in system or first_blank_row(obs) % 2 == 0
            out.append(good_move(obs) if ok else "pass")
            self.tokens_generated += 3
        return out


class MagicReflection:
    """A reflection LM that always proposes the prompt that makes the toy agent play well."""

    def __init__(self, text: str = "MAGIC: fill one cell per turn."):
        self.text = text
        self.prompts: list[str] = []

    def __call__(self, prompt):
        self.prompts.append(prompt)
        return f"Here is a better instruction:\n```\n{self.text}\n```"


class SpySource:
    """A task source, passed through, that records which split each call asked for."""

    def __init__(self, source):
        self.source = source
        self.calls: list[str] = []
        self.max_live = getattr(source, "max_live", None)

    def train(self, *args, **kwargs):
        self.calls.append("train")
        return self.source.train(*args, **kwargs)

    def validation(self):
        self.calls.append("validation")
        return self.source.validation()

    def heldout(self):
        self.calls.append("heldout")
        return self.source.heldout()
