"""Site placeholders in WebArena task configs and the base URLs they stand for.

A WebArena config writes its sites as placeholders: ``__SHOPPING__/checkout``.
A placeholder ``__NAME__`` (capitals, digits and single underscores) stands for
the base URL in the environment variable ``WA_NAME``, BrowserGym's names:
``WA_SHOPPING``, ``WA_SHOPPING_ADMIN``, ``WA_REDDIT``, ``WA_GITLAB``,
``WA_WIKIPEDIA``, ``WA_MAP``, ``WA_HOMEPAGE``; any other name works the same
way (``__SHOP__`` is ``WA_SHOP``). Only the placeholders a task uses need a
variable.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

PLACEHOLDER = re.compile(r"__([A-Z](?:[A-Z0-9]|_(?!_))*)__")
ENV_PREFIX = "WA_"


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _strings(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _strings(value)


def placeholders(config) -> list[str]:
    """The placeholder names (``SHOPPING``, ...) used anywhere in ``config``'s strings, sorted."""
    return sorted({m.group(1) for s in _strings(config) for m in PLACEHOLDER.finditer(s)})


def site_urls(names, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{name: base URL}`` from ``WA_<name>``; ValueError naming the first variable missing or not a URL."""
    environ = os.environ if environ is None else environ
    urls = {}
    for name in names:
        var = ENV_PREFIX + name
        value = environ.get(var, "").strip()
        if not value:
            raise ValueError(f"{var} is not set: it is the base URL of the site that __{name}__ stands for "
                             f"(e.g. {var}=http://localhost:7770; docs/web.md)")
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{var}={value!r} is not an http(s) URL with a host")
        urls[name] = value.rstrip("/")
    return urls


def fill(obj, urls: Mapping[str, str]):
    """A copy of ``obj`` with every ``__NAME__`` in its strings replaced by ``urls[NAME]``."""
    if isinstance(obj, str):
        return PLACEHOLDER.sub(lambda m: urls[m.group(1)] if m.group(1) in urls else m.group(0), obj)
    if isinstance(obj, dict):
        return {k: fill(v, urls) for k, v in obj.items()}
    if isinstance(obj, list):
        return [fill(v, urls) for v in obj]
    return obj


def hosts(urls: Mapping[str, str]) -> list[str]:
    """The host names of ``urls``' values (what env.options.web.allowed_hosts must hold), sorted."""
    return sorted({urlsplit(u).hostname.lower() for u in urls.values()})
