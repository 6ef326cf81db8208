"""Name -> factory registry for text environments."""

from __future__ import annotations

import inspect
from typing import Any, Callable

from esopt.envs.base import TextEnv

EnvFactory = Callable[..., TextEnv]

_REGISTRY: dict[str, EnvFactory] = {}


def register(name: str, factory: EnvFactory, *, overwrite: bool = False) -> None:
    """Register ``factory`` (a TextEnv class or callable) under ``name``.

    Registering the same factory twice is a no-op; registering a different
    factory under a taken name needs ``overwrite=True``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("environment name must be a non-empty string")
    if not callable(factory):
        raise ValueError(f"factory for environment {name!r} is not callable")
    existing = _REGISTRY.get(name)
    if existing is not None and existing is not factory and not overwrite:
        raise ValueError(f"environment {name!r} is already registered; pass overwrite=True to replace it")
    _REGISTRY[name] = factory


def list_envs() -> list[str]:
    """Names of all registered environments, sorted."""
    return sorted(_REGISTRY)


def _check_kwargs(name: str, factory: EnvFactory, kwargs: dict[str, Any]) -> None:
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # builtins without a signature: let the call decide
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    accepted = [
        p.name
        for p in params.values()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ValueError(
            f"environment {name!r} got unexpected argument(s) {', '.join(unknown)}; "
            f"accepted: {', '.join(accepted) or '(none)'}"
        )


def make(name: str, **kwargs: Any) -> TextEnv:
    """Build the environment registered under ``name`` with ``kwargs``."""
    factory = _REGISTRY.get(name)
    if factory is None:
        known = ", ".join(list_envs()) or "(none)"
        raise ValueError(f"unknown environment {name!r}; registered: {known}")
    _check_kwargs(name, factory, kwargs)
    return factory(**kwargs)
