"""Which Chromium BrowserGym launches.

BrowserEnv takes ``pw_chromium_kwargs`` for the page browser, but its chat
window (``browsergym.core.chat.Chat``) launches a second browser with
Playwright's defaults, i.e. Playwright's own downloaded Chromium. On machines
that only have a system Chromium, :func:`use_chromium` makes a given
executable the default of every ``chromium.launch`` on BrowserGym's shared
Playwright instance, so both browsers start from it. Explicit arguments still
win.
"""

from __future__ import annotations

import functools
import os

_patched: dict[int, str] = {}


def system_chromium() -> str | None:
    """``$ESOPT_CHROMIUM``, else the chromium env.id=browsergym finds on PATH (web_browser.find_chromium), else None."""
    path = os.environ.get("ESOPT_CHROMIUM")
    if path:
        return path
    from esopt.envs.browser.browser import find_chromium

    try:
        return find_chromium()
    except FileNotFoundError:
        return None


def use_chromium(executable_path: str | None = None) -> str | None:
    """Make ``executable_path`` (default: :func:`system_chromium`) the default Chromium of BrowserGym.

    Idempotent; returns the path in use, or None when there is none (then
    Playwright's own browser is used, if installed).
    """
    path = executable_path or system_chromium()
    if not path:
        return None
    from browsergym.core import _get_global_playwright

    chromium = _get_global_playwright().chromium
    if _patched.get(id(chromium)) == path:
        return path
    launch = getattr(chromium, "_esopt_original_launch", chromium.launch)

    @functools.wraps(launch)
    def launch_with_default(*args, **kwargs):
        kwargs.setdefault("executable_path", path)
        return launch(*args, **kwargs)

    chromium._esopt_original_launch = launch
    chromium.launch = launch_with_default
    _patched[id(chromium)] = path
    return path
