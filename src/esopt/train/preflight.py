"""Checks that run before a command creates or changes anything on disk, so a bad setting
costs one line, not an orphan run folder or a traceback minutes in."""
from __future__ import annotations

from ..utils.settings import ConfigError


def check_env(env, tasks=None, splits=None) -> None:
    """The env's own checks (its spec's preflight; with `tasks`, the tasks config too): tasks that exist,
    splits as large as asked (`splits`: the ones the command plays; None: training's), packages and
    programs it needs."""
    from ..envs.spec import UnknownEnv, resolve

    try:
        resolve(env.id).check(env, tasks, splits)
    except (UnknownEnv, ValueError) as err:
        raise ConfigError(str(err)) from None


def warn_unchecked_options(env) -> None:
    """One line at start for env.options keys that a **kwargs factory does not name (docs/envs.md)."""
    import sys

    from ..envs.spec import resolve

    spec = resolve(env.id)
    loose = spec.unchecked_options(env.options)
    if loose:
        name = getattr(spec.factory, "__name__", env.id)
        print(f"[esopt] warning: env.options not in {name}'s signature (it takes **kwargs, so nothing checks them): "
              f"{', '.join(loose)}", file=sys.stderr)


def overlap_warning(cfg, splits=None) -> str | None:
    """The line warning that the splits a command plays must share tasks: the env declares fewer distinct
    tasks (EnvSpec.distinct_tasks) than held-out, validation and (when it trains) one training task need;
    None when they fit or the env declares no count."""
    from ..envs.spec import resolve

    n = resolve(cfg.env.id).task_count(cfg.env)
    plays = splits or ("train", "validation", "heldout")
    asked = {"held-out": cfg.tasks.heldout_skip + cfg.tasks.heldout if "heldout" in plays else 0,
             "validation": cfg.tasks.validation if "validation" in plays else 0,
             "training": 1 if "train" in plays else 0}
    if n is None or sum(asked.values()) <= n:
        return None
    parts = [f"{k} {v}" if k != "training" else "the training tasks" for k, v in asked.items() if v]
    shared = ("held-out reward partly measures tasks trained on" if asked["training"] and asked["held-out"]
              else "the same tasks count more than once")
    return (f"[esopt] warning: env.id={cfg.env.id} has {n} distinct tasks under these options, fewer than the "
            f"splits ask for ({' + '.join(parts)}): they must share tasks, so {shared}")


def warn_overlapping_tasks(cfg, splits=None) -> None:
    """One line at start when the splits must share tasks (overlap_warning)."""
    import sys

    line = overlap_warning(cfg, splits)
    if line:
        print(line, file=sys.stderr)


def check_plays(cfg, splits=None) -> None:
    """One env of each split built, reset, stepped and closed (train/envcheck.py); a failure is one line. It says
    what it checks before it starts (a slow env or reward function is seen working), and a Ctrl-C or SIGTERM
    within it ends the command with one line: nothing was written."""
    from . import stop
    from .envcheck import EnvBroken, check_env, plays_line

    line = plays_line(cfg, splits)
    if line:
        print(line, flush=True)
    try:
        with stop.phase("the pre-run check", kept="nothing was written (it runs before any folder or file)"):
            check_env(cfg, splits)
    except EnvBroken as err:
        raise ConfigError(str(err)) from None


def check_device(device: str) -> None:
    """runtime.device must name a device torch has here: cpu, cuda, cuda:N or mps."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"unknown runtime.device {device!r}; use cpu, cuda, cuda:N or mps") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"runtime.device={device} but torch sees no CUDA device here (torch {torch.__version__}); "
                              f"use runtime.device=cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"runtime.device={device} but torch sees {torch.cuda.device_count()} CUDA device(s)")
    elif dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise ConfigError(f"runtime.device={device} but MPS is not available here; use runtime.device=cpu")
    elif dev.type != "cpu":
        raise ConfigError(f"unsupported runtime.device {device!r}; use cpu, cuda, cuda:N or mps")


def check_run_config(cfg, device: bool = True, splits=None, served: bool = False) -> None:
    """Everything a new run or an evaluation can check without loading the model (device=False:
    not runtime.device, which Ray workers use on their own machines; splits: the task splits the
    command plays, None: training's; served: esopt serve, whose harness plays the episodes)."""
    from ..models.loading import check_model_name
    from .algorithm import algorithm
    from .sinks import wandb_missing

    check_model_name(cfg.model)  # before torch is imported: a wrong name costs a fraction of a second
    if cfg.env.id == "external":
        from ..envs.external import PLAYED_BY_A_HARNESS

        if not served:
            raise ConfigError(PLAYED_BY_A_HARNESS)
        if cfg.serve.evaluations != "harness":
            raise ConfigError("env.id=external: esopt has no env to play its evaluations on; add "
                              "serve.evaluations=harness (the harness plays them with center)")
    if served and cfg.algo == "es" and cfg.es.drop_tied_rounds:
        raise ConfigError(f"es.drop_tied_rounds={cfg.es.drop_tied_rounds}: esopt serve hands the harness one set of "
                          "tasks per generation, so tied tasks cannot be replaced; set es.drop_tied_rounds=0")
    check_env(cfg.env, cfg.tasks, splits)
    warn_unchecked_options(cfg.env)
    if device:
        check_device(cfg.runtime.device)
    missing = wandb_missing(cfg.log.wandb)
    if missing:
        raise ConfigError(missing)
    if not served or cfg.serve.evaluations == "esopt":  # what esopt itself will play of the env: does it play?
        check_plays(cfg, splits if not served else ("validation", "heldout"))
    warn_overlapping_tasks(cfg, splits)
    algorithm(cfg.algo).check(cfg)  # the algorithm's own settings (ES: the context search's library)
