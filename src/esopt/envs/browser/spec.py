"""env.id=browsergym for the harness: its options, task source, checks and capabilities.

Nothing here imports BrowserGym: a config naming env.id=browsergym validates without it."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ...utils.settings import Strict
from ..spec import EnvSpec
from .env import DEFAULT_MAX_TURNS, BrowserGymEnv


class JudgeConfig(Strict):
    """env.options.web.judge: the LLM judge WebArena's fuzzy_match asks (an OpenAI-compatible chat endpoint)."""

    base_url: str  # e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1 (POST <base_url>/chat/completions)
    model: str
    api_key_env: str | None = None  # name of the environment variable holding the API key (none: send no key)
    timeout_s: float = Field(60.0, gt=0)


class WebConfig(Strict):
    """env.options.web: the browser and what an episode may do in it."""

    max_live: int = Field(16, ge=1)  # episodes with an open browser context at once (the rest wait their turn)
    # processes that play the live episodes' browsers side by side (envs/browser/workers.py); 1: in this process
    workers: int = Field(1, ge=1)
    obs_max_chars: int = Field(4000, ge=200)  # page text per observation; longer pages are cut
    # the page as text (envs/browser/obs.py): esopt (text held by a plain element shows its id, text areas are
    # marked) or browsergym (the tree as BrowserGym prints it; esopt's before 2026-12)
    observation: Literal["esopt", "browsergym"] = "esopt"
    # the URL line: short names a local task page (file://) by its path under the task package, the same wherever
    # esopt is installed; full is the whole URL (what runs before 2026-12-04 saw: their observations held the
    # install path)
    url: Literal["short", "full"] = "short"
    allowed_hosts: list[str] = ["127.0.0.1", "localhost"]  # http(s) hosts pages and goto() may reach
    timeout_ms: int = Field(5000, ge=100)  # every browser call of an action
    chromium: str | None = None  # executable; none: chromium / chromium-browser / google-chrome on PATH
    headless: bool = True
    judge: JudgeConfig | None = None  # WebArena fuzzy_match tasks only (docs/web.md)


class BrowserOptions(Strict):
    """env.options of env.id=browsergym."""

    # BrowserGym task ids (miniwob.click-button, esopt-webshop.3, ...) or <namespace>.*
    task: list[str] = []
    web: WebConfig = WebConfig()

    @field_validator("task", mode="before")
    @classmethod
    def _task_list(cls, v):
        return [t.strip() for t in v.split(",") if t.strip()] if isinstance(v, str) else v


class WebSource:
    """BrowserGym episodes (task id, seed) per split; envs are reset only when their episode starts,
    at most env.options.web.max_live at a time, so a split of hundreds does not open hundreds of pages."""

    skips_heldout = True  # tasks.heldout_skip: the held-out episodes after the first skip

    def __init__(self, env_cfg, tasks_cfg, run_seed: int):
        from .tasks import WebTaskSet, expand

        self.env_cfg, self.tasks_cfg = env_cfg, tasks_cfg
        self.max_live = env_cfg.options.web.max_live
        self.set = WebTaskSet(expand(env_cfg.options.task), run_seed)

    def _envs(self, episodes):
        w = self.env_cfg.options.web
        if w.workers > 1:  # each episode's browser in one of the worker processes
            from .workers import RemoteEnv, worker_pool

            pool = worker_pool(w.workers)
            build = lambda **kw: RemoteEnv(pool, **kw)  # noqa: E731
        else:
            build = BrowserGymEnv
        envs = [build(task=task, seed=seed, max_turns=self.env_cfg.max_turns, obs_max_chars=w.obs_max_chars,
                      allowed_hosts=w.allowed_hosts, timeout_ms=w.timeout_ms, chromium=w.chromium,
                      headless=w.headless, observation=w.observation, url=w.url,
                      judge=w.judge.model_dump() if w.judge else None)
                for task, seed in episodes]
        return envs, [f"{task}#{seed}" for task, seed in episodes], [None] * len(envs)

    def train(self, n: int, generation: int, repeat: int = 1):
        key = generation if self.tasks_cfg.fresh_each_generation else 0
        return self._envs([e for e in self.set.train(n, key) for _ in range(repeat)])

    def heldout(self):
        skip = self.tasks_cfg.heldout_skip
        return self._envs(self.set.heldout(skip + self.tasks_cfg.heldout)[skip:] * self.tasks_cfg.heldout_repeats)

    def validation(self):
        return self._envs(self.set.validation(self.tasks_cfg.validation) * self.tasks_cfg.heldout_repeats)


def preflight(env_cfg, tasks_cfg=None, splits=None) -> None:
    """Tasks named and known, a task in every split the command plays, their packages importable, a
    chromium to drive."""
    o = env_cfg.options
    if not o.task:
        raise ValueError("env.id=browsergym needs env.options.task: BrowserGym task ids, "
                         "e.g. env.options.task=miniwob.click-button")
    try:
        from .browser import find_chromium
        from .tasks import WebTaskSet, expand, task_entrypoint, task_hosts
    except ImportError as err:
        raise ValueError(f"env.id=browsergym needs BrowserGym ({err}); pip install 'esopt[web]' "
                         f"(make install does)") from None
    try:
        tasks = expand(o.task)
        judge = o.web.judge.model_dump() if o.web.judge else None
        allowed = {h.lower().strip("[]") for h in o.web.allowed_hosts}
        for task in tasks:
            task_entrypoint(task)
            missing = [h for h in task_hosts(task, judge) if h not in allowed]
            if missing:
                raise ValueError(f"env.options.web.allowed_hosts lacks {', '.join(missing)}, where {task}'s sites "
                                 f"are; add it (env.options.web.allowed_hosts="
                                 f"[{', '.join([*o.web.allowed_hosts, *missing])}])")
        if splits is None:  # training's
            splits = ("train", "heldout", *(("validation",) if tasks_cfg is not None and tasks_cfg.validation else ()))
        WebTaskSet(tasks, 0).check(splits)
        find_chromium(o.web.chromium)
    except FileNotFoundError as err:
        raise ValueError(str(err)) from None


def _renderer():
    from .render import render_web_episode

    return render_web_episode


SPEC = EnvSpec(id="browsergym", factory=BrowserGymEnv, options=BrowserOptions, tasks=WebSource, preflight=preflight,
               smoke=False,  # a browser per env: its preflight checks chromium and the site instead
               renderer=_renderer(), max_live=lambda env_cfg: env_cfg.options.web.max_live,
               default_max_turns=DEFAULT_MAX_TURNS, summary_keys=("task",),
               run_options=("web.max_live", "web.workers", "web.timeout_ms", "web.chromium", "web.headless",
                            "web.judge.base_url", "web.judge.api_key_env", "web.judge.timeout_s"),
               description="any BrowserGym task (MiniWoB++, the local shop, WebArena) in a headless chromium")
