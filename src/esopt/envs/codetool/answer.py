"""Reading a final answer: the last ``\\boxed{...}`` of a reply, as an integer."""
from __future__ import annotations

import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_INT = re.compile(r"[-+]?\d+")


def boxed(reply: str) -> str | None:
    """The text inside the reply's last ``\\boxed{...}``, stripped (None: there is none)."""
    found = _BOXED.findall(reply or "")
    return found[-1].strip() if found else None


def as_int(text: str | None) -> int | None:
    """A boxed text as an integer: digits with optional sign, thousands separators (, _ or spaces) and a
    trailing ``.0``; None when it is anything else."""
    if text is None:
        return None
    t = re.sub(r"(?<=\d)[,_ ](?=\d{3}\b)", "", text.strip().strip("$"))
    t = re.sub(r"\.0+$", "", t)
    return int(t) if _INT.fullmatch(t) else None


def correct(reply: str, answer: int) -> bool:
    """Whether the reply's last boxed answer is ``answer``."""
    return as_int(boxed(reply)) == answer
