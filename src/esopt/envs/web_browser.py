"""One browser per process, reused by every BrowserGym episode it plays.

BrowserGym's ``BrowserEnv.reset`` launches two browsers per episode (the page's
and a chat window's) and closes them at the next reset: 2-6 s per episode.
:class:`ReusableBrowserEnv` is a ``BrowserEnv`` whose reset opens a fresh
browser *context* (cookies, storage and pages of its own, so episodes cannot
see each other) in a browser shared by the process, launched once and again
only when it has died; it keeps the chat in memory and reads only the
observation parts esopt shows the model (the accessibility tree with element
ids; no screenshot or DOM snapshot). Everything else (task setup and
validation, element marking, action execution) is BrowserGym's own code.

Containment, set on every context:
- requests go only to allowed places: http(s) on ``allowed_hosts`` (any port),
  ``file:`` URLs under ``allowed_files`` directories, and ``data:``/``blob:``/
  ``about:`` URLs; anything else is aborted and counted in ``blocked``;
- JavaScript dialogs (alert, confirm, prompt, beforeunload) are dismissed and
  recorded, so none can stall an episode;
- every Playwright call times out after ``timeout_ms``;
- the action string BrowserGym runs is parsed again by BrowserGym's strict
  high-level parser (one call of an allowed function), after esopt's own
  parser wrote it (esopt.envs.web_actions).
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from browsergym.core.env import BrowserEnv

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_BROWSERS: dict[tuple[str, bool], object] = {}  # (executable, headless) -> playwright Browser of this process
_ROLES = ("user", "user_image", "assistant", "info", "infeasible")
# calls window.browsergym_page_activated (BrowserGym's binding that tracks the active tab) whenever a page
# loads, gains focus or gets input
_ACTIVATION_EVENTS = ("focus", "focusin", "load", "pageshow", "mousemove", "mouseup", "mousedown", "wheel",
                      "keyup", "keydown", "input", "touchstart", "touchend")
_ACTIVATION_JS = ("window.browsergym_page_activated();\n"
                  + "".join(f"window.addEventListener({e!r}, () => window.browsergym_page_activated(), "
                            "{capture: true});\n" for e in _ACTIVATION_EVENTS)
                  + "document.addEventListener('visibilitychange', () => { if (document.visibilityState === "
                    "'visible') window.browsergym_page_activated(); }, {capture: true});\n")


def find_chromium(configured: str | None = None) -> str:
    """Path of the chromium to drive: ``configured`` if given, else the first of CHROMIUM_NAMES on PATH."""
    if configured:
        path = shutil.which(configured) or (configured if Path(configured).is_file() else None)
        if path is None:
            raise FileNotFoundError(f"env.web.chromium={configured!r} is not an executable file")
        return path
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    raise FileNotFoundError("no chromium found on PATH (looked for " + ", ".join(CHROMIUM_NAMES)
                            + "); install it (Debian: apt-get install chromium) or set env.web.chromium")


def shared_browser(executable: str, headless: bool = True):
    """This process's browser for ``executable``, launched on first use and again if it has died."""
    from browsergym.core import _get_global_playwright
    from browsergym.core.constants import BROWSERGYM_ID_ATTRIBUTE

    key = (executable, headless)
    browser = _BROWSERS.get(key)
    if browser is not None and browser.is_connected():
        return browser
    pw = _get_global_playwright()
    pw.selectors.set_test_id_attribute(BROWSERGYM_ID_ATTRIBUTE)  # BrowserGym finds elements by their bid
    browser = pw.chromium.launch(executable_path=executable, headless=headless, slow_mo=0,
                                 args=["--disable-features=OverlayScrollbars,ExtendedOverlayScrollbars"],
                                 ignore_default_args=["--hide-scrollbars"])
    _BROWSERS[key] = browser
    return browser


def close_shared_browsers(stop_playwright: bool = False) -> None:
    """Close every browser this process launched (tests, end of a run); with ``stop_playwright``
    also stop BrowserGym's process-wide Playwright, so another sync Playwright can start."""
    for browser in list(_BROWSERS.values()):
        try:
            browser.close()
        except Exception:  # already gone
            pass
    _BROWSERS.clear()
    if stop_playwright:
        import browsergym.core as core

        pw = core._get_global_playwright() if core._PLAYWRIGHT else None
        if pw is not None:
            try:
                pw.stop()
            finally:
                core._set_global_playwright(None)


class MemoryChat:
    """BrowserGym's chat without its browser window: the messages list its tasks read."""

    def __init__(self):
        self.messages: list[dict] = []

    def add_message(self, role: str, msg: str) -> None:
        if role not in _ROLES:
            raise ValueError(f"Invalid role: {role}")
        if role != "info":
            self.messages.append({"role": role, "timestamp": time.time(), "message": msg})

    def wait_for_user_message(self) -> None:
        raise RuntimeError("no user to wait for: esopt plays episodes without one")

    def close(self) -> None:
        pass


def url_allowed(url: str, allowed_hosts, allowed_files) -> bool:
    """Whether a request for ``url`` may leave the page (see the module docstring)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("data", "blob", "about"):
        return True
    if scheme in ("http", "https"):
        host = (parts.hostname or "").lower()
        return bool(host) and host in {h.lower().strip("[]") for h in allowed_hosts}
    if scheme == "file":
        try:
            path = Path(unquote(parts.path)).resolve()
        except (OSError, ValueError):
            return False
        return any(path.is_relative_to(Path(root).resolve()) for root in allowed_files)
    return False


class ReusableBrowserEnv(BrowserEnv):
    """A BrowserGym env whose episodes share this process's browser (a fresh context each)."""

    def __init__(self, task_entrypoint, task_kwargs: dict | None = None, *, executable: str, headless: bool = True,
                 timeout_ms: int = 5000, allowed_hosts=("127.0.0.1", "localhost"), allowed_files=(), **kwargs):
        from browsergym.core.action import functions
        from browsergym.core.action.highlevel import HighLevelActionSet

        actions = HighLevelActionSet(subsets=["chat", "infeas", "bid", "nav"], strict=True, multiaction=False,
                                     custom_actions=[functions.check, functions.uncheck, functions.noop])
        super().__init__(task_entrypoint, task_kwargs=task_kwargs or {}, headless=headless, timeout=timeout_ms,
                         slow_mo=0, pre_observation_delay=0, action_mapping=actions.to_python_code, **kwargs)
        self.executable = executable
        self.allowed_hosts = tuple(allowed_hosts)
        self.allowed_files = tuple(str(p) for p in allowed_files)
        self.blocked: list[str] = []  # requests aborted in this episode
        self.dialogs: list[str] = []  # JavaScript dialogs dismissed in this episode

    # -- episode life cycle ------------------------------------------------------------------
    def end_episode(self) -> None:
        """Tear the task down and close the episode's context; the browser stays up."""
        task, context, self.task, self.context, self.page = self.task, self.context, None, None, None
        for step in ((task.teardown if task else None), (context.close if context else None)):
            if step is None:
                continue
            try:
                step()
            except Exception:  # a dead browser or page: nothing left to close
                pass
        self.page_history = {}

    def close(self) -> None:
        self.end_episode()

    def _setting(self, name: str):
        mine = getattr(self, name)
        return getattr(self.task, name) if mine is None else mine

    def _guard(self, route) -> None:
        url = route.request.url
        if url_allowed(url, self.allowed_hosts, self.allowed_files):
            route.continue_()
        else:
            self.blocked.append(url[:200])
            route.abort("blockedbyclient")

    def _on_page(self, page) -> None:
        page.on("dialog", self._on_dialog)

    def _on_dialog(self, dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message[:200]}")
        try:
            dialog.dismiss()
        except Exception:  # the page went away meanwhile
            pass

    def _get_obs(self):
        """BrowserGym's observation without the parts esopt's text never shows: no screenshot, no DOM
        snapshot and its element properties (each a round trip and an encode per step; bench web).
        Elements are marked with their ids and the accessibility tree is read as BrowserGym does,
        tried up to three times (the last time leniently) when a frame changes under the reading."""
        import numpy as np
        import playwright.sync_api
        from browsergym.core.env import _try_to_extract_legacy_goal
        from browsergym.core.observation import MarkingError, _post_extract, _pre_extract, extract_merged_axtree

        tries = 3
        for attempt in range(tries):
            try:
                _pre_extract(self.page, tags_to_mark=self.tags_to_mark, lenient=attempt == tries - 1)
                axtree = extract_merged_axtree(self.page)
                break
            except (playwright.sync_api.Error, MarkingError):
                _post_extract(self.page)
                if attempt == tries - 1:
                    raise
                time.sleep(0.2)
        _post_extract(self.page)
        return {"chat_messages": tuple(dict(m) for m in self.chat.messages),
                "goal": _try_to_extract_legacy_goal(self.goal_object),
                "goal_object": tuple(dict(m) for m in self.goal_object),
                "open_pages_urls": tuple(page.url for page in self.context.pages),
                "active_page_index": np.asarray([self.context.pages.index(self.page)]),
                "url": self.page.url, "axtree_object": axtree, "last_action": self.last_action,
                "last_action_error": self.last_action_error,
                "elapsed_time": np.asarray([time.time() - self.start_time])}

    def reset(self, seed=None, *args, **kwargs):
        import gymnasium as gym

        gym.Env.reset(self, seed=seed)
        self.np_random = None  # the task owns all randomness
        self.end_episode()
        self.blocked, self.dialogs = [], []
        self.task = self.task_entrypoint(seed=seed, **self.task_kwargs)
        browser = shared_browser(self.executable, self.headless)
        self.browser = None  # not ours to close: BrowserEnv.close would
        viewport = self._setting("viewport")
        self.context = browser.new_context(viewport=viewport, locale=self._setting("locale"),
                                           timezone_id=self._setting("timezone_id"), **self.pw_context_kwargs)
        self.context.set_default_timeout(self._setting("timeout"))
        self.context.set_default_navigation_timeout(self._setting("timeout"))
        self.context.route("**/*", self._guard)
        self.context.on("page", self._on_page)
        self.context.expose_binding("browsergym_page_activated",
                                    lambda source: self._activate_page_from_js(source["page"]))
        self.context.add_init_script(_ACTIVATION_JS)
        self.chat = MemoryChat()
        self.page = self.context.new_page()
        goal, task_info = self.task.setup(page=self.page)
        if goal is None:
            self.goal_object = []
        elif isinstance(goal, str):
            self.goal_object = [{"type": "text", "text": goal}]
        elif isinstance(goal, list):
            self.goal_object = goal
        else:
            raise ValueError(f"task goal should be a str or a list, got {type(goal).__name__}")
        for message in self.goal_object:
            if message.get("type") == "text":
                self.chat.add_message("user", message["text"])
        self._wait_dom_loaded()
        self._active_page_check()
        self.start_time = time.time()
        self.last_action, self.last_action_error = "", ""
        self.infeasible_message_received = False
        return self._get_obs(), {"task_info": task_info}
