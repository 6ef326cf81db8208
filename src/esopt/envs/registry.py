"""Name -> factory registry for text environments."""

from __future__ import annotations

import inspect
from typing import Any, Callable

from esopt.envs.base import TextEnv

EnvFactory = Callable[..., TextEnv]
EpisodeRenderer = Callable[[dict], str]  # Episode.to_json() dict -> HTML fragment (run reports)

_REGISTRY: dict[str, EnvFactory] = {}
_RENDERERS: dict[str, EpisodeRenderer] = {}


def register(name: str, factory: EnvFactory, *, overwrite: bool = False) -> None:
    """Register ``factory`` (a TextEnv class or callable) under ``name``.

    Registering the same factory twice is a no-op; registering a different
    factory under a taken name needs ``overwrite=True``.
    """
    _put(_REGISTRY, name, factory, "factory", "is already registered", overwrite)


def _put(table: dict, name: str, value, what: str, taken: str, overwrite: bool) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError("environment name must be a non-empty string")
    if not callable(value):
        raise ValueError(f"{what} for environment {name!r} is not callable")
    existing = table.get(name)
    if existing is not None and existing is not value and not overwrite:
        raise ValueError(f"environment {name!r} {taken}; pass overwrite=True to replace it")
    table[name] = value


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


def register_renderer(name: str, renderer: EpisodeRenderer, *, overwrite: bool = False) -> None:
    """Register how run reports draw an episode of environment ``name``.

    ``renderer(episode)`` gets one recorded episode (``Episode.to_json()`` plus
    ``generation`` and, for training episodes, ``member``) and returns an HTML
    fragment showing it turn by turn; every text taken from the episode must be
    escaped. A ``css`` string attribute on the renderer, if any, is added once to
    the page's stylesheet. Environments without a renderer get a plain turn table.
    """
    _put(_RENDERERS, name, renderer, "renderer", "already has a renderer", overwrite)


def renderer_for(name: str) -> EpisodeRenderer | None:
    """The episode renderer registered for ``name``, or None."""
    return _RENDERERS.get(name)
