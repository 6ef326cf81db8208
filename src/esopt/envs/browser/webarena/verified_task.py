"""``VerifiedTask``: one WebArena-Verified task on sites you host, as a BrowserGym task graded by Verified's CLI.

``setup`` fills the start URLs' placeholders from ``WA_*``, adds the cookies of
``<site>_state.json`` from ``$ESOPT_WEBARENA_AUTH`` for each of the task's
sites that has one, starts a Playwright trace of the episode's browser
context (the network record Verified grades), opens the start URLs and
returns the intent followed by :data:`ANSWER_FORMAT`.

``validate``: once the agent has sent a message (``send_msg_to_user``), the
trace is stopped and the message and the trace are graded by
``webarena-verified eval-tasks`` (:func:`verified.grade`); the episode ends
with its score. Before that the episode goes on with reward 0.
``report_infeasible`` ends it with 0 (Verified wants a status such as
``NOT_FOUND_ERROR`` in the JSON answer instead). Pages that are not http(s)
end it with 0, as in :mod:`task`.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import playwright.sync_api
from browsergym.core.task import AbstractBrowserTask

from . import sites, verified
from .episode import final_answer, http_on, leave_foreign_pages
from .preflight import AUTH_ENV

ANSWER_FORMAT = (
    "\n\nWhen you are done, send your final answer with send_msg_to_user as one JSON object: "
    '{"task_type": "RETRIEVE", "MUTATE" or "NAVIGATE", "status": "SUCCESS" (or NOT_FOUND_ERROR, '
    "ACTION_NOT_ALLOWED_ERROR, PERMISSION_DENIED_ERROR, DATA_VALIDATION_ERROR, UNKNOWN_ERROR), "
    '"retrieved_data": a list of the values asked for (null unless you retrieved data), '
    '"error_details": null, or why it failed}.')


class VerifiedTask(AbstractBrowserTask):
    """A WebArena-Verified ``task`` (its agent-facing fields; ``name`` is its esopt id)."""

    @classmethod
    def get_task_id(cls) -> str:
        return "esopt-webarena-verified"

    def __init__(self, seed: int | None = None, task: dict | None = None, name: str = "webarena-verified task"):
        super().__init__(seed)
        self.name, self.task = name, task or {}
        try:
            verified.check_task(self.task)
        except ValueError as err:
            raise ValueError(f"{name}: {err}") from None
        self.slow_mo, self.timeout = 0, 10_000
        self.urls: dict[str, str] = {}
        self.context = None
        self.tracing = False

    def setup(self, page: playwright.sync_api.Page) -> tuple[str, dict]:
        self.urls = sites.site_urls(verified.site_names(self.task))
        self.context = page.context
        folder = os.environ.get(AUTH_ENV, "").strip()
        for site in self.task.get("sites", []):
            state = Path(folder) / f"{site}_state.json" if folder else None
            if state is not None and state.is_file():
                page.context.add_cookies(json.loads(state.read_text(encoding="utf-8")).get("cookies", []))
        # Playwright records the network (trace.network) only along with DOM snapshots
        page.context.tracing.start(snapshots=True, screenshots=False)
        self.tracing = True
        for k, url in enumerate(sites.fill(self.task["start_urls"], self.urls)):
            if k:
                page = page.context.new_page()
            page.goto(url, timeout=30_000)
        return self.task["intent"] + ANSWER_FORMAT, {"task": self.name, "sites": self.urls}

    def validate(self, page: playwright.sync_api.Page, chat_messages: list) -> tuple[float, bool, str, dict]:
        info: dict = {"task": self.name}
        left = leave_foreign_pages(page, http_on(None))
        if left:
            info["left_site"] = left
            return 0.0, True, "", info
        answer = final_answer(chat_messages)
        if answer is None:
            return 0.0, False, "", info
        with tempfile.TemporaryDirectory(prefix="esopt-wav-trace-") as tmp:
            trace = Path(tmp) / verified.TRACE_NAME
            self.context.tracing.stop(path=str(trace))
            self.tracing = False
            result = verified.grade(int(self.task["task_id"]), answer, trace, self.urls)
        info["verified"] = {k: result.get(k) for k in ("status", "score")}
        return float(result["score"]), True, "", info

    def teardown(self) -> None:
        if self.tracing and self.context is not None:
            try:
                self.context.tracing.stop()
            except Exception:  # noqa: BLE001 - the context is closed right after; nothing to keep
                pass
            self.tracing = False
