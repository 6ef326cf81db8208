"""``WebArenaTask``: one WebArena-format config on sites you host, as a BrowserGym task.

Episode life: ``setup`` fills the config's site placeholders from ``WA_*``
(:mod:`sites`), logs in where the config asks (below), sets its geolocation,
opens ``start_url`` (several, joined by `` |AND| ``, in tabs of their own)
and returns the intent. The sites are yours; the episode does not reset them.

``validate`` (after every action):

- The agent sent a message to the user (``send_msg_to_user``), or reported
  the task infeasible (read as the answer ``N/A``, as WebArena does): done,
  graded on every eval type (:mod:`grade`).
- No answer yet, and the task has only state types (``url_match``,
  ``program_html``) and no ``fuzzy_match``: done with reward 1 as soon as they
  pass (as BrowserGym's WebArena tasks do), else the episode goes on.
- A page shows something that is not http(s) (``data:``, ``chrome:``; the
  request guard cannot stop those): the page is blanked and the episode ends
  with reward 0.

Login (``require_login``): the config's ``storage_state`` names a Playwright
storage-state file (``./.auth/shopping_state.json``); esopt reads the file of
that name from the folder in ``$ESOPT_WEBARENA_AUTH`` and adds its cookies to
the episode's browser context (local storage is not restored). Without that
folder a login task fails to load with a one-line error.
"""
from __future__ import annotations

import json

import playwright.sync_api
from browsergym.core.task import AbstractBrowserTask

from . import sites
from .configs import needs_judge
from .episode import final_answer, http_on, leave_foreign_pages
from .grade import grade
from .judge import Judge
from .preflight import AUTH_ENV, auth_file, check_config

__all__ = ["AUTH_ENV", "STATE_TYPES", "WebArenaTask"]

STATE_TYPES = ("url_match", "program_html")


class WebArenaTask(AbstractBrowserTask):
    """A WebArena-format ``config`` (``name`` is its esopt task id, for messages)."""

    @classmethod
    def get_task_id(cls) -> str:
        return "esopt-webarena"

    def __init__(self, seed: int | None = None, config: dict | None = None, name: str = "webarena task",
                 judge: dict | None = None) -> None:
        super().__init__(seed)
        self.name = name
        self.raw = config or {}
        self.judge = Judge.from_config(judge)
        try:
            check_config(self.raw, self.judge)
        except ValueError as err:
            raise ValueError(f"{name}: {err}") from None
        self.slow_mo = 0
        self.timeout = 10_000
        self.config: dict = {}
        self.hosts: tuple[str, ...] = ()

    def setup(self, page: playwright.sync_api.Page) -> tuple[str, dict]:
        urls = sites.site_urls(sites.placeholders(self.raw))
        self.config = sites.fill(self.raw, urls)
        self.hosts = tuple(sites.hosts(urls))
        state = auth_file(self.raw)
        if state is not None:
            page.context.add_cookies(json.loads(state.read_text(encoding="utf-8")).get("cookies", []))
        if self.config.get("geolocation"):
            page.context.grant_permissions(["geolocation"])
            page.context.set_geolocation(self.config["geolocation"])
        starts = [u.strip() for u in self.config["start_url"].split(" |AND| ")]
        for k, url in enumerate(starts):
            if k:
                page = page.context.new_page()
            page.goto(url, timeout=30_000)
        return self.config["intent"], {"task": self.name, "sites": urls}

    def validate(self, page: playwright.sync_api.Page, chat_messages: list) -> tuple[float, bool, str, dict]:
        info: dict = {"task": self.name}
        left = leave_foreign_pages(page, http_on(None))
        if left:
            info["left_site"] = left
            return 0.0, True, "", info
        answer = final_answer(chat_messages, infeasible="N/A")
        types = self.config["eval"]["eval_types"]
        if answer is None:
            if any(t not in STATE_TYPES for t in types) or needs_judge(self.config):
                return 0.0, False, "", info
            outcome = grade(self.config, answer=None, page=page, judge=None, hosts=self.hosts)
            info["checks"] = outcome.checks
            return (1.0, True, "", info) if outcome.reward == 1.0 else (0.0, False, "", info)
        outcome = grade(self.config, answer=answer, page=page, judge=self.judge, hosts=self.hosts)
        info["checks"] = outcome.checks
        return outcome.reward, True, "", info

    def teardown(self) -> None:
        pass
