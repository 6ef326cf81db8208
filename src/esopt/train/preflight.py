"""Checks that run before a command creates or changes anything on disk, so a bad setting
costs one line, not an orphan run folder or a traceback minutes in."""
from __future__ import annotations

from ..config import ConfigError

def check_env(env) -> None:
    from ..envs.sudoku_puzzles import check_blanks
    from .tasks import TASK_SOURCES

    if env.id not in TASK_SOURCES:
        raise ConfigError(f"unknown env.id {env.id!r}; available: {', '.join(TASK_SOURCES)}")
    try:
        check_blanks(env.size, env.blanks)
    except ValueError as err:
        raise ConfigError(f"env.blanks={env.blanks} is out of range for a {env.size}x{env.size} Sudoku ({err})") from None


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


def check_run_config(cfg) -> None:
    """Everything a new run or an evaluation can check without loading the model."""
    from ..models.loading import check_model_name

    check_env(cfg.env)
    check_device(cfg.runtime.device)
    check_model_name(cfg.model)
