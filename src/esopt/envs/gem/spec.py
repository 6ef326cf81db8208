"""env.id=gem for the harness: its options, its factory and its preflight. Imports nothing of GEM:
the factory and the preflight import it (esopt.envs.gem.offline, .env). A task is a seed of GEM's
reset (the default SeedTasks): GEM's reset(seed) draws the same game for the same seed."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from ...utils.settings import Strict
from ..spec import EnvSpec


class GemOptions(Strict):
    """env.options of env.id=gem."""

    # a GEM env id, e.g. game:GuessTheNumber-v0-easy (required: GEM's ids range from 1-turn math
    # questions to 100-turn games, and the agent's prompt is written for one of them)
    task: str
    # keyword arguments for gem.make(task, ...), over the id's registered ones (e.g. max_number for
    # GuessTheNumber); the turn limit is env.max_turns, which GEM is given too
    make_kwargs: dict[str, Any] = {}
    # what the agent sees each turn: concat = GEM's rules, every observation so far and the board
    # (self-contained, for agent.history=window); concat_with_action = that and the agent's replies;
    # last = the newest observation and the board (for agent.history=full)
    observation: Literal["concat", "concat_with_action", "last"] = "concat"

    @field_validator("task")
    @classmethod
    def _named(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("name a GEM env id, e.g. game:GuessTheNumber-v0-easy")
        return v.strip()

    @field_validator("make_kwargs")
    @classmethod
    def _no_turn_limit(cls, v: dict) -> dict:
        if "max_turns" in v:
            raise ValueError("set the turn limit with env.max_turns (GEM gets it too), not make_kwargs.max_turns")
        return v


def gem_env(task: str, make_kwargs: dict | None = None, observation: str = "concat", max_turns: int | None = None):
    """One GEM env (``esopt.envs.make("gem", task="game:Mastermind-v0-easy")``)."""
    from .env import GemEnv

    o = GemOptions(task=task, make_kwargs=make_kwargs or {}, observation=observation)
    return GemEnv(o.task, o.make_kwargs, o.observation, max_turns)


def preflight(env_cfg) -> None:
    """GEM is installed, the task is a GEM id, make_kwargs are settings of its env, and nothing would be
    downloaded; then (unless it loads a dataset) the env is built and reset once. One line if not.
    Makes no network call."""
    from .env import GemEnv
    from .offline import check_make_kwargs, missing_data, registration

    o = env_cfg.options
    entry = registration(o.task)
    sandbox = {**entry.kwargs, **o.make_kwargs}.get("sandbox_type", "none")
    if o.task.startswith("code:") and sandbox != "bwrap":
        raise ValueError(f"env.options.task={o.task} runs the model's code, and GEM's sandbox_type={sandbox} would run "
                         "it unconfined on this machine: set env.options.make_kwargs.sandbox_type=bwrap (bubblewrap)")
    problem = missing_data(o.task, o.make_kwargs)
    if problem:
        raise ValueError(problem)
    check_make_kwargs(o.task, o.make_kwargs)  # imports the id's GEM module
    if {**entry.kwargs, **o.make_kwargs}.get("dataset_name"):
        return  # loading a dataset is the run's work (datasets may ask the Hub for updates)
    try:
        GemEnv(o.task, o.make_kwargs, o.observation, env_cfg.max_turns).reset(seed=0)
    except Exception as err:
        raise ValueError(f"env.options.task={o.task}: GEM could not build and reset it ({type(err).__name__}: "
                         f"{' '.join(str(err).split())[:300]})") from None


def distinct_games(env_cfg) -> int | None:
    """How many different games a GEM id draws under its settings, where GEM's game has a small fixed space:
    GuessTheNumber (max_number - min_number + 1: 10 for game:GuessTheNumber-v0-easy) and Mastermind (codes of
    code_length from num_numbers); None for other ids, settings drawn per episode, or an id that fails to load
    (the preflight names that)."""
    import inspect
    import math

    from .offline import env_class, registration

    o = env_cfg.options
    try:
        cls, entry = env_class(o.task), registration(o.task)
        defaults = {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()
                    if p.default is not inspect.Parameter.empty}
    except (ValueError, TypeError):
        return None
    kw = {**defaults, **entry.kwargs, **o.make_kwargs}
    ints = lambda *keys: all(isinstance(kw.get(k), int) and not isinstance(kw.get(k), bool) for k in keys)  # noqa: E731
    if cls.__name__ == "GuessTheNumberEnv" and ints("min_number", "max_number"):
        return max(kw["max_number"] - kw["min_number"] + 1, 1)
    if cls.__name__ == "MastermindEnv" and ints("code_length", "num_numbers"):
        n, k = kw["num_numbers"], kw["code_length"]
        return n ** k if kw.get("duplicate_numbers") else math.perm(n, k) or None
    return None


SPEC = EnvSpec(id="gem", factory=gem_env, options=GemOptions, preflight=preflight, distinct_tasks=distinct_games,
               # GEM's games end their own episodes at their registered limit (up to 100 turns); this
               # bounds only its *-random ids, which draw a limit per episode
               default_max_turns=100, summary_keys=("task",),
               description="GEM's text games and tasks (env.options.task: a GEM id, e.g. game:GuessTheNumber-v0-easy)")
