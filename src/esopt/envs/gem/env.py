"""GemEnv: one GEM env as a TextEnv (env.id=gem).

* Observations: GEM answers a step with one line ("At turn 2, you guessed 5, and the target number is
  higher than 5.") and keeps the rules and the board in its first observation and in
  ``info["suffix"]``. Like GEM's own ObservationWrapper, ``observation="concat"`` shows the agent
  every observation so far plus the suffix (self-contained: right for agent.history=window),
  ``concat_with_action`` also the agent's replies, ``last`` the newest one plus the suffix (for
  agent.history=full, where the conversation holds the rest).
* Randomness: GEM's envs draw from the global ``random`` and ``numpy.random`` generators, and
  ``reset(seed)`` reseeds both. Each GemEnv keeps its own copy of those generators' states and swaps
  it in around GEM's calls, so an episode depends only on its seed and its actions (not on the
  episodes stepped between its turns) and the process's global generators stay as they were. The
  rollout calls envs from one thread; the swap is not thread-safe.
* Cost: GEM is built once per task and make_kwargs in a process (offline: no download). Games are
  copied for each episode; envs with get_state/set_state (GEM's dataset and reasoning_gym envs,
  one question per episode) are shared, each episode keeping its own state.
"""
from __future__ import annotations

import copy
import inspect
import json
import random
import re
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..base import TextEnv
from .offline import env_class, import_gem, no_downloads, registration

OBSERVATIONS = ("concat", "concat_with_action", "last")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_BUILT: dict[tuple, tuple] = {}  # (task, make_kwargs) -> (env, shared, baseline state)


class GemEnv(TextEnv):
    """A GEM env (``task``: a GEM id such as game:GuessTheNumber-v0-easy) as a TextEnv."""

    def __init__(self, task: str, make_kwargs: dict | None = None, observation: str = "concat",
                 max_turns: int | None = None):
        if observation not in OBSERVATIONS:
            raise ValueError(f"observation must be one of {', '.join(OBSERVATIONS)}, got {observation!r}")
        kwargs = dict(make_kwargs or {})
        if max_turns is not None and "max_turns" in inspect.signature(env_class(task).__init__).parameters:
            kwargs["max_turns"] = max_turns  # GEM states the limit in its rules and scores the last turn by it
        env, self._shared, self._baseline = built(task, kwargs)
        self._env = env if self._shared else copy.deepcopy(env)
        self.task, self.observation = task, observation
        own = max_turns if max_turns is not None else \
            registration(task).kwargs.get("max_turns", getattr(env, "max_turns", None))
        # GEM's *-random ids draw their limit per episode (registered as None): the spec's default bounds them
        self.max_turns = own if isinstance(own, int) and not isinstance(own, bool) and own > 0 else None
        self._rng: list = [None, None]  # this env's (random, numpy.random) states
        self._state = None  # this episode's state of a shared env
        self._seen: list[list] = []  # [GEM's observation, the reply to it]
        self._text = ""

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        with _swapped(self._rng):
            if self._shared:
                self._env.set_state(self._baseline)  # e.g. reasoning_gym's counter, which regrows its dataset
            obs, info = self._env.reset(seed=seed)
            if self._shared:
                self._state = self._env.get_state()
        self._seen = [[str(obs), None]]
        self._text = self._compose(info)
        return self._text, _public(info)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self._seen:
            raise RuntimeError("GemEnv.step() before reset()")
        with _swapped(self._rng):
            if self._shared:
                self._env.set_state(self._state)
            obs, reward, terminated, truncated, info = self._env.step(action)
            if self._shared:
                self._state = self._env.get_state()
        obs, reward, terminated, truncated = str(obs), float(reward), bool(terminated), bool(truncated)
        self._seen[-1][1] = info.get("parsed_action", action)
        self._seen.append([obs, None])
        self._text = self._compose(info)
        out = _public(info)
        boxed = _BOXED.findall(action)
        out["action"] = boxed[-1].strip() if boxed else None
        if obs != _terminal_state():
            out["feedback"] = obs
        if terminated or truncated:
            out["solved"] = solved(obs, reward, terminated, truncated, info)
        return self._text, reward, terminated, truncated, out

    def render_text(self) -> str:
        return self._text

    def close(self) -> None:
        if not self._shared and callable(getattr(self._env, "close", None)):
            self._env.close()

    def _compose(self, info: dict) -> str:
        seen = self._seen[-1:] if self.observation == "last" else self._seen
        parts = []
        for obs, reply in seen:
            parts.append(obs)
            if reply is not None and self.observation == "concat_with_action":
                parts.append(str(reply))
        return str(info.get("prefix", "")) + "".join(_line(p) for p in parts) + str(info.get("suffix", ""))


def solved(obs: str, reward: float, terminated: bool, truncated: bool, info: dict) -> bool:
    """Whether an ended GEM episode was won: GEM's ``correct`` (math, qa), a full score of a
    single-turn env (reasoning_gym), or a game that ended itself with its "Congratulations" line
    (GEM's games end a won game so, and a lost or timed-out one otherwise)."""
    if "correct" in info:
        return bool(info["correct"])
    if obs == _terminal_state():
        return reward >= 1.0
    return terminated and not truncated and obs.lstrip().startswith("Congratulations")


def built(task: str, make_kwargs: dict) -> tuple:
    """(env, shared, baseline): GEM's env for task and make_kwargs, built once in this process from a
    fixed seed, with nothing downloaded."""
    key = (task, json.dumps(make_kwargs, sort_keys=True, default=repr))
    if key not in _BUILT:
        gem = import_gem()
        env_class(task)  # imports its module (and nltk, for the word games) before no_downloads patches it
        with _swapped([random.Random(0).getstate(), np.random.RandomState(0).get_state()]), no_downloads():
            env = gem.make(task, **make_kwargs)
            shared = callable(getattr(env, "get_state", None)) and callable(getattr(env, "set_state", None))
            baseline = None
            if shared:
                env.reset(seed=0)  # its state exists from here on
                baseline = env.get_state()
        _BUILT[key] = (env, shared, baseline)
    return _BUILT[key]


@contextmanager
def _swapped(state: list):
    """Run with ``state`` = [random state, numpy.random state] as the global generators' states (fresh
    entropy if None), keep their states after in ``state``, then put the outer ones back."""
    outer = random.getstate(), np.random.get_state()
    if state[0] is None:
        random.seed()
        np.random.seed()
    else:
        random.setstate(state[0])
        np.random.set_state(state[1])
    try:
        yield
    finally:
        state[0], state[1] = random.getstate(), np.random.get_state()
        random.setstate(outer[0])
        np.random.set_state(outer[1])


def _line(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


def _public(info: dict) -> dict:
    return {k: v for k, v in info.items() if k not in ("suffix", "prefix")}


def _terminal_state() -> str:
    from gem.utils.constants import TERMINAL_STATE  # single-turn envs end with it

    return TERMINAL_STATE
