"""Before any run folder exists: one env of each split a command plays is built, reset and stepped once
(with an empty reply) and closed, so an env or reward function that raises, or answers outside the TextEnv
protocol, is one line naming it instead of a traceback and a half-made run folder. Envs whose spec says
building one is costly (a browser: smoke=False) are left to their own preflight."""
from __future__ import annotations

import time

SPLITS = ("train", "validation", "heldout")


class EnvBroken(ValueError):
    """An env of the config fails before any episode is played (one line: what raised or came back)."""


def checked_splits(cfg, splits=None) -> list[str]:
    return [s for s in (splits or SPLITS) if s != "validation" or cfg.tasks.validation]


def plays_line(cfg, splits=None) -> str | None:
    """What check_env is about to do, in one line (None: the env's spec leaves it to its own preflight)."""
    from ..envs.spec import resolve

    if not getattr(resolve(cfg.env.id), "smoke", True):
        return None
    names = ", ".join("held-out" if s == "heldout" else s for s in checked_splits(cfg, splits))
    limit = cfg.run.call_timeout_s
    return (f"[esopt] pre-run check: one env.id={cfg.env.id} env of each split ({names}) built, reset, stepped with "
            f"an empty reply and closed; " + (f"each call limited to run.call_timeout_s={limit:g} s" if limit else
                                              "no time limit on its calls (run.call_timeout_s=null)"))


def check_env(cfg, splits=None) -> float:
    """Build, reset, step and close one env of each split (None: training's: train, validation if any,
    held-out); the seconds it took. Raises EnvBroken."""
    from ..agent.rollout import EnvFailure, checked
    from ..envs.spec import resolve
    from .failures import reason
    from .tasks import TaskSource

    spec = resolve(cfg.env.id)
    if not getattr(spec, "smoke", True):
        return 0.0
    t0 = time.perf_counter()
    splits = checked_splits(cfg, splits)
    source = TaskSource(cfg.env, cfg.tasks, cfg.run.seed)
    for split in splits:
        what = f"env.id={cfg.env.id} ({split} split)"
        envs = []
        try:
            try:
                envs, _, observations = source.train(1, 0) if split == "train" else getattr(source, split)()
            except (Exception, SystemExit) as err:  # noqa: BLE001 (the user's code: anything it raises is named)
                raise EnvBroken(f"{what}: building its envs raised {reason(_trace(err))}") from None
            if not envs:
                continue
            env, obs = envs[0], observations[0]
            limit = cfg.run.call_timeout_s
            if obs is None:
                result = checked(_call(env.reset, limit=limit), "reset", cfg.agent.max_observation_chars)
                if isinstance(result, EnvFailure):
                    raise EnvBroken(f"{what}: reset() {_said(result)}")
            _check_tools(env, cfg.agent, what)
            result = checked(_call(env.step, "", limit=limit), "step")
            if isinstance(result, EnvFailure):
                raise EnvBroken(f"{what}: step('') (a reply, as the model may give one) {_said(result)}")
        finally:
            for env in envs:
                try:
                    env.close()
                except Exception:  # noqa: BLE001
                    pass
    return time.perf_counter() - t0


def _check_tools(env, agent, what: str) -> None:
    """The env's tools can be declared (agent/tools.py), and the agent's history keeps the question in view
    while it calls them (a tool turn's observation is the tools' results only)."""
    from ..agent.tools import tools_of

    try:
        tools = tools_of(env)
    except Exception as err:  # noqa: BLE001 (a tools() that raises, a tool without hints or docstring)
        raise EnvBroken(f"{what}: its tools cannot be declared: {err}") from None
    if tools and agent.history == "window" and agent.window < 2:
        names = ", ".join(t.name for t in tools)
        raise EnvBroken(f"{what} declares tools ({names}): a tool call's results are the next turn's observation, "
                        f"so the question must stay in view: set agent.history=full (or agent.window >= 2)")


def _call(method, *args, limit: float | None = None):
    """method(*args) within the time limit (agent/timebox.py); an EnvFailure for whatever it raised."""
    from ..agent.rollout import EnvFailure
    from ..agent.timebox import CallTimeout, time_limit

    try:
        with time_limit(limit, f"the env's {method.__name__}()"):
            return method(*args)
    except (Exception, SystemExit, CallTimeout) as err:  # noqa: BLE001 (sys.exit() in the user's code is its failure)
        return EnvFailure(_trace(err))


def _trace(err: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception(err))


def _said(failure) -> str:
    from .failures import reason

    text = reason(failure.traceback)
    return text if text.startswith("the env's") else f"raised {text}"
