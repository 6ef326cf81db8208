"""The rewards of a TRL environment class's episode: TRL-style reward functions (env.options.reward),
called with one-item lists (``completions``, ``prompts``, ``environments`` and each dataset column), their
numbers weighted (env.options.reward_weights) and summed, plus the instance's ``get_reward()`` if it has one."""
from __future__ import annotations

import inspect
import math
import numbers
from dataclasses import dataclass
from typing import Callable

from ..dataset.reward import RewardError, import_reward

RESERVED = ("prompts", "completions", "environments")


@dataclass(frozen=True)
class RewardFn:
    name: str  # as env.options.reward names it
    fn: Callable
    weight: float = 1.0


def import_rewards(paths: list[str], weights: list[float] | None) -> list[RewardFn]:
    """The reward functions env.options.reward names; ValueError with one line naming the one that fails."""
    weights = weights or [1.0] * len(paths)
    return [RewardFn(p, import_reward(p), float(w)) for p, w in zip(paths, weights)]


def arguments(row: dict, prompt: str, completion: list[dict], instance) -> dict:
    """Everything a reward function is offered, TRL's way: one-item lists."""
    columns = {k: [v] for k, v in row.items() if k not in RESERVED + ("prompt", "completion")}
    return {"prompts": [[{"role": "user", "content": prompt}]], "completions": [completion],
            "environments": [instance], **columns}


def fitted(fn: Callable, offered: dict) -> dict:
    """The offered keywords fn takes: all of them when it has **kwargs, else the ones it names."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return offered
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return offered
    return {k: v for k, v in offered.items() if k in params}


def check_call(reward: RewardFn, row: dict) -> None:
    """ValueError with one line when the function cannot be called with TRL's arguments and this row's columns."""
    offered = arguments(row, "", [], None)
    try:
        sig = inspect.signature(reward.fn)
    except (TypeError, ValueError):
        return  # a builtin: the first episode will tell
    try:
        sig.bind(**fitted(reward.fn, offered))
    except TypeError as err:
        raise ValueError(f"env.options.reward={reward.name} cannot be called as a TRL reward function with "
                         f"{', '.join(offered)}: {err}") from None


def total(rewards: list[RewardFn], instance, row: dict, prompt: str, completion: list[dict],
          task: str) -> tuple[float, dict]:
    """The episode's reward (the weighted sum of the reward functions' numbers, plus get_reward()) and each
    source's number; RewardError (failing the episode) when one raises or returns something else."""
    offered = arguments(row, prompt, completion, instance)
    parts: dict[str, float | None] = {}
    value = 0.0
    for r in rewards:
        try:
            got = r.fn(**fitted(r.fn, offered))
        except (Exception, SystemExit) as err:  # sys.exit() fails the episode, not the run
            raise RewardError(f"reward function {r.name} raised {type(err).__name__}: {err} (task {task})") from err
        if not isinstance(got, (list, tuple)) or len(got) != 1:
            raise RewardError(f"reward function {r.name} returned {_short(got)} for one completion; return a list "
                              f"of one number (task {task})")
        parts[r.name] = None if got[0] is None else _number(got[0], f"reward function {r.name}", task)
        value += 0.0 if got[0] is None else r.weight * parts[r.name]  # None: not applicable here, as in TRL
    own = getattr(instance, "get_reward", None)
    if callable(own):
        try:
            parts["get_reward"] = _number(own(), f"{type(instance).__name__}.get_reward()", task)
        except RewardError:
            raise
        except (Exception, SystemExit) as err:
            raise RewardError(f"{type(instance).__name__}.get_reward() raised {type(err).__name__}: {err} "
                              f"(task {task})") from err
        value += parts["get_reward"]
    return value, parts


def _number(value, what: str, task: str) -> float:
    if isinstance(value, (str, bytes)) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise RewardError(f"{what} returned {_short(value)}; a reward is a finite number (task {task})")
    return float(value)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:120] + "..."
