"""The name-based API over env specs (esopt.envs.spec): register a factory, make an env, give it a
renderer. ``make`` and ``renderer_for`` accept every id ``resolve`` does (registered names,
``esopt.envs`` entry points, ``package.module:attr``)."""

from __future__ import annotations

from typing import Any, Callable

from esopt.envs.base import TextEnv
from esopt.envs.spec import EnvSpec, _unknown_kwargs, available, register_spec, resolve, spec_of

EnvFactory = Callable[..., TextEnv]
EpisodeRenderer = Callable[[dict], str]  # Episode.to_json() dict -> HTML fragment (run reports)


def register(name: str, factory: EnvFactory | EnvSpec, *, overwrite: bool = False) -> None:
    """Register ``factory`` (a TextEnv class or callable, or an EnvSpec) under ``name``.

    Registering the same factory twice is a no-op; registering a different
    factory under a taken name needs ``overwrite=True``.
    """
    if not callable(factory) and not isinstance(factory, EnvSpec):
        raise ValueError(f"factory for environment {name!r} is not callable")
    register_spec(factory if isinstance(factory, EnvSpec) else spec_of(factory, name), name, overwrite=overwrite,
                  given=factory)


def list_envs() -> list[str]:
    """Names of all registered environments and installed esopt.envs entry points, sorted."""
    return available()


def make(name: str, **kwargs: Any) -> TextEnv:
    """Build the environment ``name`` (any id resolve() accepts) with ``kwargs``."""
    spec = resolve(name)
    unknown, accepted = _unknown_kwargs(spec.factory, {k: v for k, v in kwargs.items() if k != "max_turns"})
    if unknown:
        raise ValueError(f"environment {name!r} got unexpected argument(s) {', '.join(unknown)}; "
                         f"accepted: {', '.join(accepted) or '(none)'}")
    return spec.factory(**kwargs)


_RENDERERS: dict[str, EpisodeRenderer] = {}  # renderers given by name, over (or without) a spec's own


def register_renderer(name: str, renderer: EpisodeRenderer, *, overwrite: bool = False) -> None:
    """Register how run reports draw an episode of environment ``name`` (over its spec's renderer, if any).

    ``renderer(episode)`` gets one recorded episode (``Episode.to_json()`` plus
    ``generation`` and, for training episodes, ``member``) and returns an HTML
    fragment showing it turn by turn; every text taken from the episode must be
    escaped. A ``css`` string attribute on the renderer, if any, is added once to
    the page's stylesheet. Environments without a renderer get a plain turn table.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("environment name must be a non-empty string")
    if not callable(renderer):
        raise ValueError(f"renderer for environment {name!r} is not callable")
    existing = renderer_for(name)
    if existing is not None and existing is not renderer and not overwrite:
        raise ValueError(f"environment {name!r} already has a renderer; pass overwrite=True to replace it")
    _RENDERERS[name] = renderer


def renderer_for(name: str) -> EpisodeRenderer | None:
    """The episode renderer of ``name`` (registered by name, else its spec's), or None (also when the
    env cannot be found here)."""
    if name in _RENDERERS:
        return _RENDERERS[name]
    try:
        return resolve(name).renderer
    except ValueError:
        return None
