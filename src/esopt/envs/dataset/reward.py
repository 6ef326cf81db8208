"""The reward function of env.id=dataset: found by env.options.reward, called once per reply.

``fn(completion, **columns)`` gets the reply and the row's columns as keywords, and returns

- a number: the reward; the episode ends;
- ``(reward, feedback)``: feedback None ends the episode; a string is the next observation (another
  attempt, while env.options.turns allows);
- a dict ``{"reward": r, "feedback": str | None, "done": bool, "solved": bool}`` (only reward is
  required; done defaults to "feedback is None", solved to reward >= 1).

A function written for TRL (first parameter named ``completions``) is called TRL's way, with
one-item lists (``prompts=[...]``, ``completions=[...]``, each column as a list), and its list's
one number is the reward.
"""
from __future__ import annotations

import importlib.util
import inspect
import math
import numbers
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..spec import UnknownEnv, import_target

RETURN_FORMS = "a number, (reward, feedback or None), or a dict with reward[, feedback, done, solved]"


class RewardError(RuntimeError):
    """The reward function raised or returned something else than a reward (fails the episode)."""


@dataclass(frozen=True)
class Outcome:
    reward: float
    feedback: str | None = None
    done: bool = True
    solved: bool = False


_FILES: dict[str, object] = {}  # file.py -> its module (a file is run once per process)


def import_reward(path: str) -> Callable:
    """``package.module:function`` or ``path/to/file.py:function`` -> the callable; ValueError with one
    line naming env.options.reward."""
    where = f"env.options.reward={path}"
    module_name, _, attr = path.rpartition(":")
    if not module_name or not attr:
        raise ValueError(f"{where}: write package.module:function or path/to/file.py:function")
    if module_name.endswith(".py"):
        fn = _from_file(Path(module_name), attr, where)
    else:
        try:
            fn = import_target(path)
        except UnknownEnv as err:
            raise ValueError(f"{where}: {str(err).split(': ', 1)[-1]}") from None
    if not callable(fn):
        raise ValueError(f"{where}: {attr} is a {type(fn).__name__}, not a function")
    return fn


def _from_file(file: Path, attr: str, where: str):
    if not file.is_file():
        raise ValueError(f"{where}: no such file {file} (relative paths start at the working directory)")
    key = str(file.resolve())
    if key not in _FILES:
        name = f"esopt_reward_{abs(hash(key)):x}"
        spec = importlib.util.spec_from_file_location(name, key)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as err:
            sys.modules.pop(name, None)
            raise ValueError(f"{where}: importing {file} raised {type(err).__name__}: {err}") from None
        _FILES[key] = module
    try:
        obj = _FILES[key]
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj
    except AttributeError:
        raise ValueError(f"{where}: {file} has no {attr}") from None


def trl_style(fn: Callable) -> bool:
    """Whether fn takes TRL's batched arguments (its first parameter is named completions)."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return False
    return bool(params) and params[0] == "completions"


def check_call(fn: Callable, name: str, row: dict) -> None:
    """ValueError with one line when fn cannot be called with a reply and this row's columns."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin or C callable: the first episode will tell
    try:
        if trl_style(fn):
            sig.bind(prompts=[""], completions=[""], **_trl_columns(row))
        else:
            sig.bind("", **row)
    except TypeError as err:
        raise ValueError(f"env.options.reward={name} cannot be called as {fn.__name__}(completion, **columns) "
                         f"with the source's columns ({', '.join(row)}): {err}") from None


def _trl_columns(row: dict) -> dict:
    return {k: [v] for k, v in row.items() if k not in ("prompt", "completion", "completion_ids")}


def score(fn: Callable, name: str, completion: str, prompt: str, row: dict, task: str) -> Outcome:
    """Call the reward function on one reply; RewardError (failing the episode) when it raises or
    returns something else than a reward."""
    batched = trl_style(fn)
    try:
        if batched:
            value = fn(prompts=[prompt], completions=[completion], **_trl_columns(row))
        else:
            value = fn(completion, **row)
    except (Exception, SystemExit) as err:  # sys.exit() in a reward function fails its episode, not the run
        raise RewardError(f"reward function {name} raised {type(err).__name__}: {err} (task {task})") from err
    if batched:
        if not isinstance(value, (list, tuple)) or len(value) != 1:
            raise RewardError(f"reward function {name} (TRL style) returned {_short(value)} for one completion; "
                              f"return a list of one number (task {task})")
        value = value[0]
    return outcome(value, name, task)


def outcome(value, name: str, task: str) -> Outcome:
    """A reward function's answer in its three forms -> Outcome."""
    feedback, done, solved = None, None, None
    if isinstance(value, dict):
        unknown = set(value) - {"reward", "feedback", "done", "solved"}
        if "reward" not in value or unknown:
            raise RewardError(f"reward function {name} returned a dict with keys {sorted(value)}; it needs reward "
                              f"and may have feedback, done, solved (task {task})")
        reward, feedback = value["reward"], value.get("feedback")
        done, solved = value.get("done"), value.get("solved")
    elif isinstance(value, tuple) and len(value) == 2:
        reward, feedback = value
    else:
        reward = value
    if isinstance(reward, (str, bytes)) or not isinstance(reward, numbers.Real) or not math.isfinite(float(reward)):
        raise RewardError(f"reward function {name} returned {_short(value)}; return {RETURN_FORMS}, with a finite "
                          f"reward (task {task})")
    if feedback is not None and not isinstance(feedback, str):
        raise RewardError(f"reward function {name} returned feedback {_short(feedback)}; feedback is a string or "
                          f"None (task {task})")
    reward = float(reward)
    return Outcome(reward, feedback, feedback is None if done is None else bool(done),
                   reward >= 1.0 if solved is None else bool(solved))


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:120] + "..."
