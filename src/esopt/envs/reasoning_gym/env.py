"""One reasoning-gym question as a TextEnv: the agent answers, the dataset's ``score_answer`` scores
the answer; with attempts > 1 a wrong answer gets feedback (its score) and the question again.

Reward: an episode's return is the BEST score of its attempts. Each step returns what that attempt
added to the best so far (``max(0, score - best)``), so the rollout's sum of step rewards is the best
score; a later, worse attempt costs nothing. The episode ends when an answer scores 1 (``solved``)
or the attempts are used up.
"""
from __future__ import annotations

import math
import re
from typing import Any

from ..base import TextEnv

INSTRUCTIONS = {  # appended to every question (env.options.answer_format)
    "tag": "End your reply with the final answer between <answer> and </answer>.",
    "line": "Reply with the final answer only.",
}

_TAG = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_OPEN = "<answer>"
_LABEL = re.compile(r"^(?:the\s+)?(?:final\s+)?answer\s*(?:is\s*)?:\s*", re.I)  # "Answer: 42", "Final answer: 42"


def extract_answer(reply: str) -> str | None:
    """The answer in a reply: the last <answer>...</answer>; else the text after the last <answer> (a
    reply cut off by the token limit); else the last non-empty line, without an "Answer:" label.
    None when the reply is blank."""
    closed = _TAG.findall(reply)
    if closed:
        return closed[-1].strip()
    at = reply.lower().rfind(_OPEN)
    if at >= 0:
        return reply[at + len(_OPEN):].strip() or None
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    if not lines:
        return None
    return _LABEL.sub("", lines[-1], count=1).strip() or lines[-1]


def _shown(answer: str, limit: int = 80) -> str:
    return repr(answer if len(answer) <= limit else answer[:limit] + "...")


class ReasoningGymEnv(TextEnv):
    """A reasoning-gym question per episode. ``item`` (an ``build.Item``, given by the task source)
    fixes the question; without it, ``reset(seed)`` plays the first question of the dataset built
    with that seed."""

    def __init__(self, dataset: str, config: dict | None = None, level: int | None = None, attempts: int = 1,
                 answer_format: str = "tag", max_turns: int | None = None, item: Any = None):
        if answer_format not in INSTRUCTIONS:
            raise ValueError(f"answer_format must be one of {', '.join(INSTRUCTIONS)}, got {answer_format!r}")
        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {attempts}")
        self.dataset, self.config, self.level = dataset, dict(config or {}), level
        self.attempts = min(attempts, max_turns) if max_turns else attempts  # env.max_turns caps the attempts
        self.max_turns = self.attempts
        self.instruction = INSTRUCTIONS[answer_format]
        self.item, self._fixed = item, item is not None
        self.tries, self.best, self.done, self.obs = 0, 0.0, False, ""

    # -- TextEnv -------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        if not self._fixed:
            from .build import config_kwargs, draw

            kwargs = config_kwargs(self.dataset, self.config, self.level)
            self.item = draw(self.dataset, kwargs, [0 if seed is None else int(seed)], 1)[0]
        self.tries, self.best, self.done = 0, 0.0, False
        self.obs = f"{self.question}\n\n{self.instruction}"
        return self.obs, {"task": self.item.task_id, "dataset": self.dataset}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.item is None or self.done:
            raise RuntimeError("reset() the env before stepping it" if self.item is None else "the episode is over")
        answer = extract_answer(action)
        score = self.score(answer)
        self.tries += 1
        gain, self.best = max(0.0, score - self.best), max(self.best, score)
        solved = score >= 1.0
        info: dict[str, Any] = {"action": answer, "solved": solved, "score": score,
                                "record": {"score": round(score, 4), "expected": str(self.item.entry["answer"])[:200]}}
        left = self.attempts - self.tries
        if solved or left <= 0:
            self.done = True
            self.obs = "Correct." if solved else f"Not correct (score {score:.2f}); no attempts left."
            return self.obs, gain, True, False, info
        said = "Your reply had no answer." if answer is None else \
            f"Your answer {_shown(answer)} is not correct (score {score:.2f})."
        info["feedback"] = f"{said} {left} attempt{'s' if left > 1 else ''} left."
        self.obs = f"{self.question}\n\n{info['feedback']} Try again.\n{self.instruction}"
        return self.obs, gain, False, False, info

    def render_text(self) -> str:
        return self.obs

    # -- helpers -------------------------------------------------------------------------------
    @property
    def question(self) -> str:
        return str(self.item.entry["question"]).strip()

    def score(self, answer: str | None) -> float:
        """The dataset's score of `answer` in [0, 1]; a scorer that raises scores 0."""
        try:
            value = float(self.item.scorer.score_answer(answer, self.item.entry))
        except Exception:  # a scorer choking on an odd answer: the answer is wrong, not the run
            return 0.0
        return 0.0 if math.isnan(value) else min(1.0, max(0.0, value))
