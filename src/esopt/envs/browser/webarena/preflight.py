"""What a WebArena-format task needs from this machine, checked before a run and when a task loads.

``check_config`` raises ValueError (one line) when the config cannot be
graded by esopt (configs.problems), when it grades with ``fuzzy_match`` and
no judge is set, when a ``WA_*`` site variable it uses is missing, or when it
needs a login and ``$ESOPT_WEBARENA_AUTH`` holds no storage state for it;
else it returns the host names its pages need (env.options.web.allowed_hosts must
hold them). No browser package is needed here.
"""
from __future__ import annotations

import os
from pathlib import Path

from . import sites
from .configs import needs_judge, problems
from .judge import Judge

AUTH_ENV = "ESOPT_WEBARENA_AUTH"


def auth_file(config: dict, environ=None) -> Path | None:
    """The storage-state file a login task reads (None: the task needs no login); ValueError when missing."""
    environ = os.environ if environ is None else environ
    if not config.get("require_login") or not config.get("storage_state"):
        return None
    name = Path(str(config["storage_state"])).name
    folder = environ.get(AUTH_ENV, "").strip()
    if not folder:
        raise ValueError(f"it needs a login: set {AUTH_ENV} to a folder holding {name} (a Playwright storage "
                         "state of the logged-in site; docs/web.md)")
    path = Path(folder) / name
    if not path.is_file():
        raise ValueError(f"it needs a login: {path} does not exist ({AUTH_ENV}={folder})")
    return path


def check_config(config: dict, judge: Judge | None, environ=None) -> list[str]:
    """The hosts the task's pages need; ValueError (one line) for anything that keeps it from running here."""
    found = problems(config)
    if found:
        raise ValueError("; ".join(found))
    if needs_judge(config):
        if judge is None:
            raise ValueError("it grades with fuzzy_match, which needs an LLM judge: set env.options.web.judge.base_url "
                             "and env.options.web.judge.model (docs/web.md)")
        problem = judge.problem()
        if problem:
            raise ValueError(problem)
    urls = sites.site_urls(sites.placeholders(config), environ)
    auth_file(config, environ)
    return sites.hosts(urls)
