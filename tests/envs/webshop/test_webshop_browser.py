"""The shop through BrowserGym in headless Chromium: the scripted expert solves every task, wrong
answers score 0, and the browser cannot leave the site. Run with: pytest -m browser (a few minutes)."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import pytest

from esopt.envs.browser.webshop import load_tasks
from esopt.envs.browser.webshop.expert import run_expert
from esopt.envs.browser.webshop.launch import system_chromium

pytestmark = pytest.mark.browser


def _unavailable() -> str | None:
    try:
        import browsergym.core  # noqa: F401
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        return f"{exc.name} is not installed (pip install browsergym-core playwright)"
    path = system_chromium()
    if not path or not Path(path).exists():
        return "no system chromium (apt-get install chromium, or set ESOPT_CHROMIUM)"
    return None


@pytest.fixture(scope="module")
def make():
    reason = _unavailable()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests must run in CI: {reason}")
        pytest.skip(reason)
    from esopt.envs.browser.webshop.task import make_env

    envs = []

    def factory(task_id):
        env = make_env(task_id)
        envs.append(env)
        return env

    yield factory
    for env in envs:
        env.close()


def test_expert_solves_every_task(make):
    failures, steps, seconds, retries = [], [], [], 0
    for task in load_tasks():
        env = make(task["task_id"])
        try:
            run = run_expert(env, task)
        finally:
            env.close()
        steps.append(run.steps)
        seconds.append(run.seconds)
        retries += run.retries
        if run.reward != 1.0 or not run.done or not 5 <= run.steps <= 20:
            failures.append(f"task {task['task_id']} ({task['kind']}): reward {run.reward}, done {run.done}, "
                            f"{run.steps} steps {run.error} {run.actions}")
    print(f"\nexpert: {len(steps) - len(failures)}/{len(steps)} solved; steps min/median/max "
          f"{min(steps)}/{statistics.median(steps)}/{max(steps)}; seconds per task median "
          f"{statistics.median(seconds):.1f}, max {max(seconds):.1f}; timed-out actions retried: {retries}")
    assert not failures, "\n".join(failures)


def test_wrong_answers_and_wrong_states_score_zero(make):
    for task_id in (0, 15, 20):  # answer tasks: a wrong answer ends the episode unrewarded
        env = make(task_id)
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step("send_msg_to_user('I think it is the Aurora Kettle, $1.00')")
        assert (reward, terminated) == (0.0, True) and info["task_info"]["checks"] == {"string_match": False}
        env.close()

    task = next(t for t in load_tasks() if t["task_id"] == 25)  # add_to_cart, with the wrong quantity
    wrong = {**task, "instantiation_dict": {**task["instantiation_dict"],
                                           "quantity": task["instantiation_dict"]["quantity"] + 1}}
    env = make(25)
    run = run_expert(env, wrong)
    assert (run.reward, run.done, run.error) == (0.0, False, "")
    _, reward, terminated, _, _ = env.step("send_msg_to_user('Done.')")
    assert (reward, terminated) == (0.0, True)
    env.close()


def test_the_browser_cannot_leave_the_site(make):
    env = make(35)
    obs, info = env.reset(seed=0)
    task = env.unwrapped.task
    base = info["task_info"]["base_url"]
    assert obs["url"] == base + "/"
    for url in ("http://example.com/", "http://127.0.0.1:9/", "file:///etc/hostname"):
        obs, reward, terminated, _, _ = env.step(f"goto({url!r})")
        assert "ERR_BLOCKED_BY_CLIENT" in obs["last_action_error"], url
        assert obs["url"].startswith("chrome-error://") and not terminated
    assert any("example.com" in u for u in task.blocked) and any(u.startswith("file:") for u in task.blocked)
    obs, reward, terminated, _, info = env.step(f"goto({base + '/forum'!r})")  # the site itself still works
    assert obs["url"] == base + "/forum" and not obs["last_action_error"] and not terminated
    obs, reward, terminated, _, info = env.step("goto('data:text/html,<h1>elsewhere</h1>')")
    assert (reward, terminated) == (0.0, True) and info["task_info"]["left_site"]
    assert obs["url"] == "about:blank"
    env.close()

