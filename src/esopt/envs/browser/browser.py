"""One browser per process, reused by every BrowserGym episode it plays.

BrowserGym's ``BrowserEnv.reset`` launches two browsers per episode (the page's
and a chat window's) and closes them at the next reset: 2-6 s per episode.
:class:`ReusableBrowserEnv` is a ``BrowserEnv`` whose reset opens a fresh
browser *context* (cookies, storage and pages of its own, so episodes cannot
see each other) in a browser shared by the process, launched once and again
only when it has died; it keeps the chat in memory and reads only the
observation parts esopt shows the model (the accessibility tree with element
ids; no screenshot or DOM snapshot). Tasks whose pages are static files
(MiniWoB++, ``reuse_pages``) instead take a context and page an earlier episode
left, wiped first (other tabs closed, cookies and storage cleared, history reset
to about:blank): a new context and page were most of a reset's cost. Everything
else (task setup and validation, element marking, action execution) is
BrowserGym's own code.

Containment, set on every context:
- requests go only to allowed places: http(s) on ``allowed_hosts`` (any port),
  ``file:`` URLs under ``allowed_files`` directories, and ``data:``/``blob:``/
  ``about:`` URLs; anything else is aborted and counted in ``blocked``;
- JavaScript dialogs (alert, confirm, prompt, beforeunload) are dismissed and
  recorded, so none can stall an episode;
- every Playwright call times out after ``timeout_ms``;
- the action string BrowserGym runs is parsed again by BrowserGym's strict
  high-level parser (one call of an allowed function), after esopt's own
  parser wrote it (esopt.envs.browser.actions).
"""
from __future__ import annotations

import functools
import shutil
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from browsergym.core.env import BrowserEnv

from .pw_stack import fast_stacks

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_BROWSERS: dict[tuple[str, bool], object] = {}  # (executable, headless) -> playwright Browser of this process
_ROLES = ("user", "user_image", "assistant", "info", "infeasible")
_IDLE: dict[tuple, list["_Warm"]] = {}  # context settings -> open contexts between episodes (reuse_pages)
MAX_IDLE = 16  # per settings; beyond that an ending episode's context is closed
# calls window.browsergym_page_activated (BrowserGym's binding that tracks the active tab) whenever a page
# loads, gains focus or gets input
_ACTIVATION_EVENTS = ("focus", "focusin", "load", "pageshow", "mousemove", "mouseup", "mousedown", "wheel",
                      "keyup", "keydown", "input", "touchstart", "touchend")
_WIPE_STORAGE_JS = "() => { try { localStorage.clear(); sessionStorage.clear(); } catch (e) {} }"
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
            raise FileNotFoundError(f"env.options.web.chromium={configured!r} is not an executable file")
        return path
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    raise FileNotFoundError("no chromium found on PATH (looked for " + ", ".join(CHROMIUM_NAMES)
                            + "); install it (Debian: apt-get install chromium) or set env.options.web.chromium")


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
    _IDLE.clear()  # their contexts close with their browser
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
        return any(path.is_relative_to(root) for root in _resolved(tuple(allowed_files)))
    return False


@functools.lru_cache(maxsize=64)
def _resolved(roots: tuple[str, ...]) -> tuple[Path, ...]:
    """The allowed folders, symlinks resolved (once per set: a page load makes ~10 requests)."""
    return tuple(Path(root).resolve() for root in roots)


class _Warm:
    """A context and its page, with handlers that act for whichever env holds them now."""

    def __init__(self, browser, key: tuple, settings: dict, timeout_ms: int, env: "ReusableBrowserEnv"):
        self.env: ReusableBrowserEnv | None = env
        self.key = key  # the context settings it was opened with
        self.context = browser.new_context(**settings)
        self.context.set_default_timeout(timeout_ms)
        self.context.set_default_navigation_timeout(timeout_ms)
        self.context.route("**/*", self._route)
        self.context.on("page", lambda page: page.on("dialog", self._dialog))
        self.context.expose_binding("browsergym_page_activated", self._activated)
        self.context.add_init_script(_ACTIVATION_JS)
        self.page = self.context.new_page()
        self.cdp = None  # a DevTools session on the page, opened when the page is first reused

    # between episodes (env None) nothing may load and dialogs are dismissed
    def _route(self, route) -> None:
        if self.env is None:
            route.abort("blockedbyclient")
        else:
            self.env._guard(route)

    def _dialog(self, dialog) -> None:
        if self.env is None:
            dialog.dismiss()
        else:
            self.env._on_dialog(dialog)

    def _activated(self, source) -> None:
        if self.env is not None:
            self.env._activate_page_from_js(source["page"])

    def usable(self, browser) -> bool:
        return self.context.browser is browser and not self.page.is_closed()

    def close(self) -> None:
        try:
            self.context.close()
        except Exception:  # a dead browser: nothing left to close
            pass


class ReusableBrowserEnv(BrowserEnv):
    """A BrowserGym env whose episodes share this process's browser: a fresh context each, or with
    ``reuse_pages`` (tasks whose pages are static files: MiniWoB++) a context and page that an earlier
    episode of this process left, wiped (cookies, storage, back/forward history) and navigated anew
    by the task's own setup. Either way an episode sees the same pages (tested)."""

    def __init__(self, task_entrypoint, task_kwargs: dict | None = None, *, executable: str, headless: bool = True,
                 timeout_ms: int = 5000, allowed_hosts=("127.0.0.1", "localhost"), allowed_files=(),
                 reuse_pages: bool = False, **kwargs):
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
        self.reuse_pages = reuse_pages
        self._warm: _Warm | None = None

    # -- episode life cycle ------------------------------------------------------------------
    def end_episode(self) -> None:
        """Tear the task down and close the episode's context; the browser stays up."""
        with fast_stacks():
            self._end_episode()

    def _end_episode(self) -> None:
        task, warm, self.task, self._warm, self.context, self.page = self.task, self._warm, None, None, None, None
        if task is not None:
            try:
                task.teardown()
            except Exception:  # a dead browser or page
                pass
        self.page_history = {}
        if warm is None:
            return
        warm.env = None
        if self.reuse_pages and self._keep(warm):
            return
        warm.close()

    def _keep(self, warm: _Warm) -> bool:
        """Put ``warm`` back for a later episode: other pages closed, storage wiped; False if it cannot be."""
        idle = _IDLE.setdefault(warm.key, [])
        if len(idle) >= MAX_IDLE or warm.page.is_closed():
            return False
        try:
            for page in warm.context.pages:
                if page is not warm.page:
                    page.close()
            warm.page.evaluate(_WIPE_STORAGE_JS)
        except Exception:  # a dead browser or page
            return False
        idle.append(warm)
        return True

    def _take_warm(self, browser, key: tuple) -> _Warm | None:
        idle = _IDLE.get(key, [])
        while idle:
            warm = idle.pop()
            if not warm.usable(browser):
                warm.close()
                continue
            warm.env = self
            try:  # as a new page: no cookies, and a history that holds only about:blank before the task's page
                warm.context.clear_cookies()
                warm.page.goto("about:blank")
                warm.cdp = warm.cdp or warm.context.new_cdp_session(warm.page)
                warm.cdp.send("Page.resetNavigationHistory")
            except Exception:
                warm.close()
                continue
            return warm
        return None

    def _context_settings(self) -> dict:
        return dict(viewport=self._setting("viewport"), locale=self._setting("locale"),
                    timezone_id=self._setting("timezone_id"), **self.pw_context_kwargs)

    def _settings_key(self) -> tuple:
        return (self.executable, self.headless, self._setting("timeout"),
                repr(sorted(self._context_settings().items())))

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
        with fast_stacks():
            return self._reset(seed)

    def step(self, action: str):
        with fast_stacks():
            return super().step(action)

    def _reset(self, seed):
        import gymnasium as gym

        gym.Env.reset(self, seed=seed)
        self.np_random = None  # the task owns all randomness
        self.end_episode()
        self.blocked, self.dialogs = [], []
        self.task = self.task_entrypoint(seed=seed, **self.task_kwargs)
        browser = shared_browser(self.executable, self.headless)
        self.browser = None  # not ours to close: BrowserEnv.close would
        key = self._settings_key()
        warm = self._take_warm(browser, key) if self.reuse_pages else None
        self._warm = warm or _Warm(browser, key, self._context_settings(), self._setting("timeout"), self)
        self.context, self.page = self._warm.context, self._warm.page
        self.chat = MemoryChat()
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
