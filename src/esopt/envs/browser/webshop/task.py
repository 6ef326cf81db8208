"""``WebShopTask``: one shipped task as a BrowserGym task, registered as ``browsergym/esopt-webshop.<task_id>``.

Episode life: ``setup`` starts a fresh :class:`ShopSite` (world ``site_seed`` of
the task, so reference answers hold; BrowserGym's episode seed does not change
the world), blocks every request that is not http(s) to the site's own
``127.0.0.1:<port>``, opens ``start_url`` and returns the intent. ``teardown``
stops the site.

When an episode is done (``validate``):

- The agent sent a message to the user (``send_msg_to_user``; a chat message
  with role ``assistant`` after the goal): done, whatever the eval types. The
  last such message is the answer for ``string_match``; state types are
  judged on the site as it is then.
- No message yet, and the task has only state types (``url_match``,
  ``program_html``, ``db_match``): done with reward 1 as soon as all of them
  pass, so an agent need not announce that it finished.
- A page of the browser shows something that is not the site and that the
  request guard could not stop (``data:``, ``chrome:`` URLs): the page is
  blanked and the episode ends with reward 0 (``info["left_site"]``).
- Otherwise not done, reward 0. ``report_infeasible`` ends the episode through
  BrowserGym with reward 0 (every shipped task is feasible).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from urllib.parse import urlsplit

import playwright.sync_api
from browsergym.core.task import AbstractBrowserTask

from esopt.envs.browser.webarena.episode import final_answer, http_on, leave_foreign_pages
from esopt.envs.browser.webshop.evaluate import STATE_TYPES, evaluate, fill_url
from esopt.envs.browser.webshop.server import ShopSite
from esopt.envs.browser.webshop.taskset import get_task, load_tasks

ENV_PREFIX = "esopt-webshop"
__all__ = ["ENV_PREFIX", "WebShopTask", "final_answer", "make_env", "register_webshop_tasks"]


class WebShopTask(AbstractBrowserTask):
    """A shipped webshop task (``task_id``) on its own fresh site."""

    @classmethod
    def get_task_id(cls) -> str:
        return ENV_PREFIX

    def __init__(self, seed: int | None = None, task_id: int = 0) -> None:
        super().__init__(seed)
        self.config = get_task(task_id)
        self.task_id = task_id
        self.slow_mo = 0  # the site needs no human pacing
        self.timeout = 5000
        self.site: ShopSite | None = None
        self.blocked: list[str] = []

    # -- episode ----------------------------------------------------------------

    def setup(self, page: playwright.sync_api.Page) -> tuple[str, dict]:
        self.site = ShopSite(self.config["site_seed"])
        base_url = self.site.start()
        own = urlsplit(base_url).netloc
        self.blocked = []

        def guard(route: playwright.sync_api.Route) -> None:
            parts = urlsplit(route.request.url)
            if parts.scheme in ("http", "https") and parts.netloc == own:
                route.continue_()
            else:
                self.blocked.append(route.request.url[:200])
                route.abort("blockedbyclient")

        page.context.route("**/*", guard)
        page.goto(fill_url(self.config["start_url"], base_url), timeout=10_000)
        return self.config["intent"], {"task_id": self.task_id, "base_url": base_url}

    def validate(self, page: playwright.sync_api.Page, chat_messages: list) -> tuple[float, bool, str, dict]:
        answer = final_answer(chat_messages)
        types = self.config["eval"]["eval_types"]
        info = {"task_id": self.task_id, "blocked_requests": len(self.blocked)}
        left = self._leave_foreign_pages(page)
        if left:
            info["left_site"] = left
            return 0.0, True, "", info
        if answer is None and "string_match" in types:
            return 0.0, False, "", info
        # without an answer only the state types can be judged (string_match tasks returned above)
        judged = [t for t in types if t in STATE_TYPES] if answer is None else list(types)
        outcome = evaluate(self.config, answer=answer, url=page.url, base_url=self.site.base_url, fetch=self.fetch,
                           db_query=self.site.db_query, types=judged)
        info["checks"] = outcome.checks
        done = answer is not None or outcome.reward == 1.0
        return (outcome.reward if done else 0.0), done, "", info

    def teardown(self) -> None:
        if self.site is not None:
            self.site.stop()
            self.site = None

    # -- helpers ----------------------------------------------------------------

    def _leave_foreign_pages(self, page: playwright.sync_api.Page) -> list[str]:
        """Blank the open pages outside the site that routing cannot stop (``data:``, ``chrome:``, ...).

        Requests to other hosts and to ``file:`` are aborted by the route guard
        and end on Chromium's error page, which is allowed, as is
        ``about:blank``. Any other page is blanked before the observation is
        taken, and the episode ends (see the module docstring).
        """
        return leave_foreign_pages(page, http_on([urlsplit(self.site.base_url).netloc]))

    def fetch(self, url: str) -> str:
        """A page of this episode's site as text ('' for any other URL or an error status)."""
        base = self.site.base_url
        if url != base and not url.startswith(base + "/"):
            return ""
        try:
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - our own loopback server
                return response.read().decode("utf-8")
        except urllib.error.URLError:
            return ""


def register_webshop_tasks() -> list[str]:
    """Register every shipped task with BrowserGym (``browsergym/esopt-webshop.<task_id>``); idempotent.

    Returns the gym ids.
    """
    import gymnasium as gym
    from browsergym.core.registration import register_task

    ids = []
    for task in load_tasks():
        name = f"{ENV_PREFIX}.{task['task_id']}"
        if f"browsergym/{name}" not in gym.envs.registry:
            register_task(name, WebShopTask, task_kwargs={"task_id": task["task_id"]})
        ids.append(f"browsergym/{name}")
    return ids


def make_env(task_id: int, chromium: str | None = None, **kwargs):
    """``gym.make("browsergym/esopt-webshop.<task_id>")`` with test-friendly defaults.

    Headless, no pre-observation delay, the system Chromium (see
    :func:`launch.use_chromium`) for both of BrowserGym's browsers; ``kwargs``
    override the defaults and go to ``BrowserEnv``.
    """
    import gymnasium as gym

    from esopt.envs.browser.webshop.launch import use_chromium

    register_webshop_tasks()
    path = use_chromium(chromium)
    options = {"headless": True, "pre_observation_delay": 0.0}
    if path:
        options["pw_chromium_kwargs"] = {"executable_path": path}
    options.update(kwargs)
    return gym.make(f"browsergym/{ENV_PREFIX}.{task_id}", **options)
