"""Checks shared by the problems, on both sides of the sandbox.

Driver side (inside the sandbox): :func:`call` runs the candidate and turns
anything it raises into a :class:`HeuristicError` naming the function;
:func:`as_choice` and :func:`as_scores` accept its return value only when it
is exactly what the signature promises. A candidate may return any object (a
NaN, a huge int, something whose ``repr`` raises), so nothing here trusts it:
descriptions of bad values are short and built defensively.

Parent side: :func:`int_list` accepts a raw output only as a JSON array of
plain ints, before any problem-specific check. numpy and standard library only.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from esopt.ahd.problems.base import HeuristicError, InvalidOutput

_SHOWN = 40  # characters of a bad value's repr kept in a message


def describe(value: Any) -> str:
    """A short description of ``value`` that cannot flood a message (its repr may be huge, slow or raise)."""
    kind = type(value).__name__[:_SHOWN]
    if value is None or isinstance(value, (bool, int, float, str, np.generic)):
        try:
            text = repr(value)
        except Exception:  # e.g. an int too long to print
            return f"a value of type {kind}"
        text = text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
        return text if type(value) in (type(None), bool, int, float) else f"{text} ({kind})"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, (list, tuple, dict, set)):
        return f"a {kind} of length {len(value)}"
    return f"a value of type {kind}"


def call(fn: Callable, entry: str, *args: Any) -> Any:
    """``fn(*args)``; whatever it raises becomes a HeuristicError naming ``entry``."""
    try:
        return fn(*args)
    except Exception as exc:
        try:
            detail = str(exc).splitlines()[0] if str(exc) else ""
        except Exception:
            detail = ""
        detail = detail if len(detail) <= 200 else detail[:197] + "..."
        name = type(exc).__name__[:_SHOWN]
        raise HeuristicError(f"{entry} raised {name}: {detail}" if detail else f"{entry} raised {name}") from exc


def as_choice(value: Any, entry: str) -> int:
    """``value`` as a plain int: an int or numpy integer (not a bool, not a float)."""
    if isinstance(value, (bool, np.bool_)):
        raise HeuristicError(f"{entry} returned {describe(value)}; expected an int")
    try:
        return operator.index(value)  # exact int since Python 3.10, even for int subclasses
    except Exception:
        raise HeuristicError(f"{entry} returned {describe(value)}; expected an int") from None


def as_scores(value: Any, entry: str, size: int) -> np.ndarray:
    """``value`` as a float array of shape (size,) with no NaN (from an array or a list of numbers)."""
    try:
        array = np.asarray(value)
    except Exception:
        raise HeuristicError(f"{entry} returned {describe(value)}; expected a numeric array") from None
    if array.dtype.kind not in "biuf":
        raise HeuristicError(f"{entry} returned {describe(value)}; expected a numeric array")
    if array.shape != (size,):
        got = describe(value) if array.ndim == 0 else f"an array of shape {array.shape}"
        raise HeuristicError(f"{entry} returned {got}; expected an array of shape ({size},)")
    array = array.astype(np.float64)
    if np.isnan(array).any():
        raise HeuristicError(f"{entry} returned NaN at index {int(np.flatnonzero(np.isnan(array))[0])}")
    return array


def int_list(output: Any, what: str, length: int | None = None, below: int | None = None) -> list[int]:
    """``output`` as a JSON array of plain ints, optionally of ``length`` items each in [0, below)."""
    if type(output) is not list:
        raise InvalidOutput(f"{what} must be a JSON array of ints, got {describe(output)}")
    if length is not None and len(output) != length:
        raise InvalidOutput(f"{what} has {len(output)} entries, expected {length}")
    for i, x in enumerate(output):
        if type(x) is not int:
            raise InvalidOutput(f"{what}[{i}] is {describe(x)}, expected an int")
        if below is not None and not 0 <= x < below:
            raise InvalidOutput(f"{what}[{i}] = {describe(x)} is out of range 0..{below - 1}")
    return output
