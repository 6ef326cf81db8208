"""env.id=browsergym: task sets, containment, lazy episodes; in a real browser (-m browser):
a scripted solver through the text interface, unsafe replies, blocked navigation, a crashed browser."""
from __future__ import annotations

import sys


import pytest

from esopt.agent.rollout import AgentContext, RolloutSettings, rollout
from esopt.config import ConfigError, load_config
from esopt.envs.base import TextEnv
from esopt.models.decode import DecodeOptions

pytest.importorskip("browsergym.core")

from esopt.envs.browser.browser import MemoryChat, url_allowed  # noqa: E402
from esopt.studies.machine.web_solver import scripted_reply  # noqa: E402
from esopt.envs.browser.tasks import WebTaskSet, expand, namespace_of, task_settings  # noqa: E402


# -- without a browser ------------------------------------------------------------------------
@pytest.mark.parametrize("url, ok", [
    ("http://127.0.0.1:8765/cart", True), ("https://localhost/x", True), ("http://LOCALHOST:1/", True),
    ("http://example.com/", False), ("http://127.0.0.1.evil.example/", False), ("ftp://127.0.0.1/", False),
    ("chrome://settings", False), ("javascript:alert(1)", False), ("data:text/html,hi", True),
    ("about:blank", True), ("file:///etc/passwd", False), ("file:///srv/pages/a.html", True),
    ("file:///srv/pages/../secret", False), ("file:///srv/pages-other/a.html", False),
])
def test_url_allowed(url, ok):
    assert url_allowed(url, ("127.0.0.1", "localhost"), ("/srv/pages",)) is ok


def test_a_local_task_page_is_named_the_same_wherever_esopt_is_installed():
    from esopt.envs.browser.obs import observation_text

    pages = ["file:///work/main/.venv/lib/python3.11/site-packages/miniwob/html/miniwob/click-test.html",
             "file:///home/me/envs/esopt/lib/python3.12/site-packages/miniwob/html/miniwob/click-test.html"]
    shown = {observation_text({"goal": "Click.", "url": u, "axtree_txt": ""}, page="") for u in pages}
    assert len(shown) == 1 and "URL: file://miniwob/click-test.html" in shown.pop()
    full = observation_text({"goal": "Click.", "url": pages[0]}, page="", url="full")  # web.url=full: as before
    assert f"URL: {pages[0]}" in full
    assert "URL: http://127.0.0.1:8765/cart" in observation_text({"url": "http://127.0.0.1:8765/cart"}, page="")
    assert load_config(None, ["env.id=browsergym", "env.task=miniwob.click-test"]).env.options.web.url == "short"


def test_memory_chat_keeps_what_tasks_read():
    chat = MemoryChat()
    chat.add_message("user", "goal")
    chat.add_message("info", "not kept")
    chat.add_message("assistant", "42")
    assert [(m["role"], m["message"]) for m in chat.messages] == [("user", "goal"), ("assistant", "42")]
    with pytest.raises(ValueError):
        chat.add_message("system", "x")
    with pytest.raises(RuntimeError):
        chat.wait_for_user_message()


def test_task_ids_and_namespaces():
    assert namespace_of("miniwob.click-button") == "miniwob"
    for bad in ("click-button", "nowhere.task"):
        with pytest.raises(ValueError, match="unknown BrowserGym task"):
            namespace_of(bad)
    every = expand(["miniwob.*"])
    assert len(every) > 100 and "miniwob.click-button" in every
    assert expand(["miniwob.login-user", "miniwob.login-user"]) == ["miniwob.login-user"]
    kwargs, files = task_settings("miniwob.click-button")
    assert kwargs["base_url"].startswith("file://") and kwargs["base_url"].endswith("/miniwob/")
    assert files and kwargs["base_url"][len("file://"):].startswith(files[0])


def test_splits_are_disjoint_and_deterministic():
    tasks = ["miniwob.click-button", "miniwob.enter-text", "miniwob.login-user"]
    a, b = WebTaskSet(tasks, 0), WebTaskSet(tasks, 0)
    held, val = a.heldout(60), a.validation(30)
    train = [e for g in range(5) for e in a.train(16, g)]
    assert held == b.heldout(60) and a.train(16, 3) == b.train(16, 3)
    assert a.train(16, 0) != a.train(16, 1)  # fresh episodes per generation
    assert len(set(held)) == 60 and len(set(val)) == 30
    assert not (set(held) & set(val)) and not (set(train) & (set(held) | set(val)))
    assert {t for t, _ in held} == set(tasks)  # every task in every split
    assert {s % 4 for _, s in held} == {0} and {s % 4 for _, s in val} == {1}
    assert {s % 4 for _, s in train} == {2, 3}
    assert WebTaskSet(tasks, 1).heldout(60) != held  # the run seed draws its own episodes


def test_config_and_preflight(tmp_path):
    from esopt.train.preflight import check_env

    # any executable stands in for chromium: preflight checks the path, it starts no browser
    exe = f"env.web.chromium={sys.executable}"
    cfg = load_config("configs/demo.yaml", ["env.id=browsergym", "env.task=miniwob.click-button,miniwob.enter-text", exe])
    assert cfg.env.options.task == ["miniwob.click-button", "miniwob.enter-text"]
    check_env(cfg.env)
    for overrides, message in [
        (["env.id=browsergym", exe], "needs env.options.task"),
        (["env.id=browsergym", "env.task=miniwob.no-such-task", exe], "unknown BrowserGym task"),
        (["env.id=browsergym", "env.task=nowhere.x", exe], "unknown BrowserGym task"),
        (["env.id=browsergym", "env.task=miniwob.click-button", "env.web.chromium=/nonexistent/chrome"],
         "not an executable"),
    ]:
        with pytest.raises(ConfigError, match=message):
            check_env(load_config("configs/demo.yaml", overrides).env)


class _LazyEnv(TextEnv):
    """Counts how many episodes are under way at once; reset raises for task 'bad'."""

    max_turns = 3
    live = 0
    most = 0

    def __init__(self, name, turns):
        self.name, self.turns, self.t = name, turns, 0

    def reset(self, seed=None):
        if self.name == "bad":
            raise RuntimeError("browser crashed at reset")
        _LazyEnv.live += 1
        _LazyEnv.most = max(_LazyEnv.most, _LazyEnv.live)
        return f"start {self.name}", {}

    def step(self, action):
        self.t += 1
        done = self.t >= self.turns
        _LazyEnv.live -= done
        return f"{self.name} turn {self.t}", float(done), done, False, {}

    def render_text(self):
        return ""


class _EchoPolicy:
    def __init__(self):
        self.batches = []

    def generate(self, convs, options, **_):
        self.batches.append(len(convs))
        return ["ok"] * len(convs)


def test_rollout_starts_lazy_episodes_at_most_max_live_at_once():
    names = ["a", "b", "bad", "c", "d", "e"]
    envs = [_LazyEnv(n, turns=1 + k % 3) for k, n in enumerate(names)]
    _LazyEnv.live = _LazyEnv.most = 0
    policy = _EchoPolicy()
    eps = rollout(policy, envs, names, [None] * len(envs), AgentContext(), RolloutSettings(DecodeOptions(4), failure_reward=-1.0, max_live=2))
    assert _LazyEnv.most == 2 and max(policy.batches) == 2
    assert [ep.observation0 for ep in eps] == ["start a", "start b", "", "start c", "start d", "start e"]
    bad = eps[2]
    assert bad.error and "browser crashed at reset" in bad.error and bad.reward == -1.0 and bad.done
    assert all(ep.done and ep.error is None and ep.reward == 1.0 for k, ep in enumerate(eps) if k != 2)
    assert [len(ep.turns) for ep in eps] == [1, 2, 0, 1, 2, 3]


# -- in a real browser ------------------------------------------------------------------------
@pytest.fixture
def browser_env():
    from esopt.envs import make
    from esopt.envs.browser.browser import close_shared_browsers

    made = []

    def build(task, seed=0, **kw):
        env = make("browsergym", task=task, seed=seed, **kw)
        made.append(env)
        return env

    yield build
    for env in made:
        env.close()
    close_shared_browsers()


@pytest.mark.browser
def test_scripted_solver_solves_miniwob_through_the_text_interface(browser_env):
    results = {}
    for task in ("miniwob.click-button", "miniwob.enter-text", "miniwob.login-user"):
        env = browser_env(task, max_turns=8, timeout_ms=15000)
        for seed in (0, 5, 9):
            obs, _ = env.reset(seed=seed)
            assert obs.startswith("Goal: ") and "\nURL: file://" in obs and "\nPage:\n" in obs
            assert "InlineTextBox" not in obs
            done = truncated = False
            steps = 0
            while not (done or truncated):
                obs, reward, done, truncated, info = env.step(scripted_reply(task, obs))
                assert info["action"], info
                steps += 1
            results[(task, seed)] = (reward, info["solved"], steps)
    assert all(r == 1.0 and solved for r, solved, _ in results.values()), results


@pytest.mark.browser
def test_unsafe_replies_never_reach_browsergym(browser_env):
    env = browser_env("miniwob.click-button", max_turns=20)
    env.reset(seed=1)
    ran = []
    real_step = env.env.step
    env.env.step = lambda code: ran.append(code) or real_step(code)
    for reply in ["__import__('os').system('touch /tmp/pwned')", "click('12'); import os",
                  "exec(\"click('12')\")", "click('12').__class__", "x = click('12')",
                  "goto('http://example.com/')", "goto('file:///etc/passwd')", "eval('1')"]:
        obs, reward, done, _, info = env.step(reply)
        assert info["action"] is None and info["feedback"].startswith("Not an action: ") and not done
        assert "\nYour last reply: Not an action" in obs and obs.count("Your last reply") == 1
    assert ran == []
    obs, *_ , info = env.step("Let me press it: click('99999')")
    assert ran == ["click('99999')"] and "Last action failed" in obs


@pytest.mark.browser
def test_pages_cannot_reach_other_hosts(browser_env):
    env = browser_env("miniwob.click-button")
    env.reset(seed=2)
    page = env.env.page
    status = page.evaluate("""async () => { try { await fetch('http://example.com/'); return 'reached'; }
                                            catch (e) { return 'blocked'; } }""")
    assert status == "blocked"
    assert any("example.com" in url for url in env.env.blocked)
    page.evaluate("alert('hi')")  # a dialog is dismissed, not left blocking the page
    assert env.env.dialogs == ["alert: hi"]
    with pytest.raises(Exception):  # last: a refused navigation leaves the page on an error page
        page.goto("http://example.com/", timeout=3000)


@pytest.mark.browser
def test_a_crashed_browser_fails_one_episode_and_the_next_gets_a_new_one(browser_env):
    from esopt.envs.browser.browser import _BROWSERS

    env = browser_env("miniwob.click-button")
    policy = _EchoPolicy()
    env.reset(seed=3)
    for browser in _BROWSERS.values():
        browser.close()  # the browser dies mid-episode
    with pytest.raises(Exception):
        env.step("click('12')")
    assert not env.live
    other = browser_env("miniwob.click-button", max_turns=1)
    eps = rollout(policy, [other], ["t"], [None], AgentContext(), RolloutSettings(DecodeOptions(4), max_live=1))
    assert eps[0].error is None and eps[0].done and eps[0].observation0.startswith("Goal: ")


@pytest.mark.browser
def test_reused_pages_play_the_same_episodes_as_fresh_pages(browser_env):
    """MiniWoB++ episodes reuse a context and page an earlier episode left: the model must see
    exactly what a fresh page shows, with nothing of the earlier episode left (cookies, storage,
    other pages, back/forward history)."""
    def play(env, task, seed):
        obs = env.reset(seed=seed)[0]
        seen = [obs]
        done = truncated = False
        while not (done or truncated):
            obs, reward, done, truncated, info = env.step(scripted_reply(task, obs))
            seen.append((obs, reward, info["solved"]))
        return seen

    plan = [(t, s) for s in (1, 2) for t in ("miniwob.click-button", "miniwob.enter-text", "miniwob.login-user")]
    played = {}
    for reuse in (False, True):
        envs = {t: browser_env(t, max_turns=8, timeout_ms=15000, reuse_pages=reuse) for t, _ in plan}
        for task, seed in plan:
            played.setdefault(reuse, []).append(play(envs[task], task, seed))
        if reuse:  # a finished episode's page went back to the pool and the next episode took it
            from esopt.envs.browser.browser import _IDLE

            assert sum(len(v) for v in _IDLE.values()) == 1
    assert played[True] == played[False]
    assert all(ep[-1][1] == 1.0 for ep in played[True])

    env = browser_env("miniwob.click-button", max_turns=4, reuse_pages=True)
    env.reset(seed=5)
    first = env.env.page
    first.evaluate("() => { document.cookie = 'left=1'; localStorage.setItem('left', '1'); window.open('about:blank'); }")
    env.step("click('99999')")
    env.close()
    env.reset(seed=6)
    assert env.env.page is first and env.env.context.pages == [first]  # reused; the extra page was closed
    assert first.evaluate("() => document.cookie + '|' + localStorage.getItem('left')") == "|null"
    fresh = browser_env("miniwob.click-button", max_turns=4, reuse_pages=False)
    fresh.reset(seed=6)
    assert first.evaluate("history.length") == fresh.env.page.evaluate("history.length") == 2  # about:blank, task
    obs_reused, *_ = env.step("go_back()")  # back leads where it would from a fresh page (about:blank)
    obs_fresh, *_ = fresh.step("go_back()")
    assert obs_reused == obs_fresh


def test_a_reply_with_several_actions_hears_that_only_the_first_ran():
    from esopt.envs.browser.actions import count_actions
    from esopt.envs.browser.env import BrowserGymEnv

    class Gym:  # stands in for BrowserGym: records what it is asked to do
        calls: list = []

        def step(self, call):
            Gym.calls.append(call)
            page = {"nodes": [{"nodeId": "1", "role": {"value": "RootWebArea"}, "name": {"value": "p"},
                               "childIds": [], "browsergym_id": "1"}]}
            return {"goal": "g", "url": "http://localhost/", "axtree_object": page, "last_action_error": ""}, 0.0, \
                False, False, {}

    env = object.__new__(BrowserGymEnv)
    env.env, env.turns, env.max_turns, env.obs_max_chars, env.live, env.style = Gym(), 0, 5, 4000, True, "esopt"
    env.allowed_hosts = ("localhost",)
    obs, _, _, _, info = env.step("click('12')\nfill('7', 'hi')\n<think>click('9')</think>")
    assert Gym.calls == ["click('12')"]
    note = "your reply held 2 actions; only the first, click('12'), was applied (one action per turn)"
    assert info["feedback"] == note and obs.endswith(f"Your last reply: {note}")
    obs, _, _, _, info = env.step("click('12')")  # one action: no note
    assert info["feedback"] is None and "Your last reply" not in obs
    assert count_actions("no call here") == 0
