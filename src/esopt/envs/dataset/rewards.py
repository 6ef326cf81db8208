"""Ready-made reward functions for env.id=dataset (``reward: esopt.envs.dataset.rewards:exact_answer``).
Each takes the reply and the row's columns as keywords (the ones it does not use land in ``**_``)."""
from __future__ import annotations

import re

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def last_number(text: str) -> float | None:
    """The last number written in text (1,234 reads as 1234), or None."""
    found = _NUMBER.findall(text or "")
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def _same(given: float | None, answer) -> bool:
    try:
        return given is not None and abs(given - float(str(answer).replace(",", ""))) < 1e-9
    except ValueError:
        return False


def exact_answer(completion: str, answer, **_) -> float:
    """1.0 when the last number in the reply equals the row's answer column, else 0.0."""
    return 1.0 if _same(last_number(completion), answer) else 0.0


def exact_answer_retry(completion: str, answer, prompt: str = "", **_) -> tuple[float, str | None]:
    """exact_answer with another attempt (env.options.turns > 1): a wrong reply gets feedback that
    repeats the question (the next observation); a right one ends the episode."""
    given = last_number(completion)
    if _same(given, answer):
        return 1.0, None
    said = "no number" if given is None else f"{given:g}"
    return 0.0, f"Your answer ({said}) is wrong. Try again. {prompt}".strip()
