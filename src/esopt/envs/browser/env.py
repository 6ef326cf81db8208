"""``env.id: browsergym``: any BrowserGym task as a TextEnv.

Each turn the model's reply is parsed by esopt.envs.browser.actions into one typed
action; only that action, written afresh, reaches BrowserGym (which parses it
again and runs it in the page). A reply that holds no valid action costs the
turn and is answered with one line of feedback; nothing runs in the browser.
The episode ends when the task says so (BrowserGym's ``terminated``), or after
``max_turns`` turns. Its reward is the task's.

The browser is this process's shared one (esopt.envs.browser.browser): ``reset``
opens a fresh context in it and the end of the episode (or an error inside
it) closes that context again, so a finished episode holds no browser state;
MiniWoB++ episodes (static pages) instead reuse a context and page an earlier
episode left, wiped and navigated anew (``reuse_pages``; the same pages, faster).
"""
from __future__ import annotations

from typing import Any

from ..base import TextEnv
from .actions import DEFAULT_ALLOWED_HOSTS, ParseError, count_actions, parse_action
from .obs import observation_text

PAGE_EXCERPT_CHARS = 600  # of each turn's new page, kept in the episode record (run reports)


def excerpt(observation: str, limit: int = PAGE_EXCERPT_CHARS) -> str:
    """The URL and the start of the page of an observation (its goal line, the same every turn, dropped)."""
    body = observation.split("\n", 1)[1] if observation.startswith("Goal: ") and "\n" in observation else observation
    return body if len(body) <= limit else body[:limit] + f"\n... ({len(body) - limit} more characters)"

DEFAULT_MAX_TURNS = 10


class BrowserGymEnv(TextEnv):
    url = "short"  # how the observation shows the page's URL (obs.shown_url); set per env in __init__

    def __init__(self, task: str, seed: int = 0, max_turns: int | None = None, obs_max_chars: int = 4000,
                 allowed_hosts=DEFAULT_ALLOWED_HOSTS, timeout_ms: int = 5000, chromium: str | None = None,
                 headless: bool = True, judge: dict | None = None, reuse_pages: bool | None = None,
                 observation: str = "esopt", url: str = "short"):
        from .browser import ReusableBrowserEnv, find_chromium
        from .tasks import reuses_pages, task_entrypoint, task_settings

        self.task_id, self.seed = task, seed
        self.max_turns = max_turns or DEFAULT_MAX_TURNS
        self.obs_max_chars = obs_max_chars
        self.style = observation  # esopt.envs.browser.obs.STYLES
        self.url = url  # short | full (obs.shown_url)
        self.allowed_hosts = tuple(allowed_hosts)
        kwargs, files = task_settings(task, judge)
        self.env = ReusableBrowserEnv(task_entrypoint(task), kwargs, executable=find_chromium(chromium),
                                      headless=headless, timeout_ms=timeout_ms, allowed_hosts=self.allowed_hosts,
                                      allowed_files=files,
                                      reuse_pages=reuses_pages(task) if reuse_pages is None else reuse_pages)
        self.turns = 0
        self.observation = self.page_observation = ""  # page_observation: without feedback on a reply
        self.live = False

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        if seed is not None:
            self.seed = seed
        self.turns = 0
        try:
            obs, info = self.env.reset(seed=self.seed)
        except BaseException:
            self.env.end_episode()
            raise
        self.live = True
        self.observation = self.page_observation = observation_text(obs, self.obs_max_chars, style=self.style, url=self.url)
        return self.observation, {"task": self.task_id, "seed": self.seed}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self.live:
            raise RuntimeError("step() outside an episode: call reset() first")
        self.turns += 1
        parsed = parse_action(action, self.allowed_hosts)
        truncated = self.turns >= self.max_turns
        if isinstance(parsed, ParseError):
            feedback = f"Not an action: {parsed.message}"
            self.observation = f"{self.page_observation}\nYour last reply: {feedback}"
            if truncated:
                self._finish()
            return self.observation, 0.0, False, truncated, {"action": None, "feedback": feedback, "solved": False}
        call = parsed.to_browsergym()
        try:
            obs, reward, terminated, gym_truncated, _ = self.env.step(call)
        except BaseException:
            self._finish()
            raise
        error = (obs.get("last_action_error") or "").strip()
        self.observation = self.page_observation = observation_text(obs, self.obs_max_chars, style=self.style, url=self.url)
        calls = count_actions(action)
        if calls > 1:  # one action per turn: the model hears that the rest of its plan did not run
            note = f"your reply held {calls} actions; only the first, {call}, was applied (one action per turn)"
            error = f"{error}; {note}" if error else note
            self.observation = f"{self.page_observation}\nYour last reply: {note}"
        record = {"page": excerpt(self.observation)}  # what the next turn sees, for run reports
        terminated, truncated = bool(terminated), truncated or bool(gym_truncated)
        if terminated or truncated:
            self._finish()
        return (self.observation, float(reward), terminated, truncated and not terminated,
                {"action": call, "feedback": error or None, "solved": bool(terminated and reward > 0),
                 "record": record})

    def _finish(self) -> None:
        self.live = False
        self.env.end_episode()

    def render_text(self) -> str:
        return self.observation

    def close(self) -> None:
        self._finish()
