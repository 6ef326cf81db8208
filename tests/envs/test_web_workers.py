"""Envs in worker processes (esopt.envs.browser.workers): same episodes as in-process, failures isolated,
dead workers replaced. Sudoku stands in for the browser where no browser is needed."""
import os
import signal

import pytest

from esopt.agent.rollout import AgentContext, RolloutSettings, call_envs, rollout
from esopt.models.decode import DecodeOptions
from esopt.envs import make
from esopt.envs.sudoku import generate_puzzle
from esopt.envs.browser.workers import RemoteEnv, WorkerDied, WorkerError, close_worker_pools, worker_pool


@pytest.fixture(autouse=True, scope="module")
def _stop_workers():
    yield
    close_worker_pools()


class FirstBlankPolicy:
    """Fills the first empty cell with the smallest digit its row lacks: deterministic, often right."""

    def __init__(self):
        self.batches = []

    def generate(self, convs, options, **_):
        self.batches.append(len(convs))
        replies = []
        for conv in convs:
            text = conv[-1]["content"]
            cells = text.split("Empty cells: ", 1)[1].split("\n", 1)[0].split(", ") if "Empty cells: " in text else []
            if not cells or not cells[0].startswith("r"):
                replies.append("r1c1=1")
                continue
            row = next(line for line in text.splitlines() if line.startswith(cells[0][:2] + " |"))
            missing = sorted(set("1234") - set(row[3:]))
            replies.append(f"{cells[0]}={missing[0]}")
        return replies


def _kwargs(k):
    return {"puzzle": generate_puzzle(4, 2, 100 + k), "reward": "partial", "max_turns": 4}


def _play(envs):
    return rollout(FirstBlankPolicy(), envs, [f"p{k}" for k in range(len(envs))], [None] * len(envs),
                   AgentContext(), RolloutSettings(DecodeOptions(8), max_live=4))


def test_worker_episodes_equal_in_process_episodes():
    local = _play([make("sudoku", **_kwargs(k)) for k in range(6)])
    remote = _play([RemoteEnv(worker_pool(2), "sudoku", **_kwargs(k)) for k in range(6)])
    assert [e.to_json() for e in remote] == [e.to_json() for e in local]
    assert all(e.reward > 0 and e.turns for e in local)  # played episodes, not failed resets
    assert all(w.episodes == 0 for w in worker_pool(2).slots)  # every finished episode freed its env


def test_calls_overlap_across_workers():
    envs = [RemoteEnv(worker_pool(2), "sudoku", **_kwargs(k)) for k in range(2)]
    for env in envs:
        env.start_reset()
    assert {env.worker.index for env in envs} == {0, 1}  # least busy worker first
    first = [env.finish_reset()[0] for env in envs]
    assert all("Empty cells" in o for o in first)
    for env in envs:
        env.close()
    assert all(w.episodes == 0 for w in worker_pool(2).slots)


def test_an_error_in_a_worker_fails_that_episode_only():
    envs = [RemoteEnv(worker_pool(2), "sudoku", **_kwargs(0)),
            RemoteEnv(worker_pool(2), "sudoku", no_such_argument=1),
            RemoteEnv(worker_pool(2), "sudoku", **_kwargs(2))]
    eps = rollout(FirstBlankPolicy(), envs, ["a", "b", "c"], [None] * 3, AgentContext(),
                  RolloutSettings(DecodeOptions(8), failure_reward=-1.0))
    assert eps[1].error and "no_such_argument" in eps[1].error and "browser worker" in eps[1].error
    assert eps[1].reward == -1.0 and eps[1].done
    assert eps[0].error is None and eps[2].error is None and eps[0].turns and eps[2].turns
    with pytest.raises(WorkerError, match="no_such_argument"):
        envs[1].reset()


def test_a_killed_worker_fails_its_episode_and_is_replaced():
    pool = worker_pool(2)
    env = RemoteEnv(pool, "sudoku", **_kwargs(3))
    env.reset()
    victim = env.worker
    os.kill(victim.proc.pid, signal.SIGKILL)
    victim.proc.join(timeout=10)
    got = call_envs([env], [0], "step", [("r1c1=1",)])
    assert "died" in got[0].traceback and "WorkerDied" in got[0].traceback
    with pytest.raises(WorkerDied):
        victim.receive(victim.send("close", 0))
    again = RemoteEnv(pool, "sudoku", **_kwargs(3))
    obs, _ = again.reset()  # a fresh process took the dead one's place
    assert "Empty cells" in obs and all(w.alive() for w in pool.slots)
    again.close()


@pytest.mark.browser
def test_miniwob_episodes_in_two_workers_are_solved():
    from esopt.studies.machine.web import scripted_reply, task_from_goal

    tasks = ["miniwob.click-button", "miniwob.enter-text", "miniwob.login-user", "miniwob.click-button"]
    envs = [RemoteEnv(worker_pool(2), task=t, seed=4 + k, max_turns=8, timeout_ms=15000) for k, t in enumerate(tasks)]
    obs = {i: r[0] for i, r in call_envs(envs, range(4), "reset", [()] * 4).items()}
    assert len(obs) == 4 and len({env.worker.index for env in envs}) == 2
    rewards = {}
    while obs:
        live = sorted(obs)
        got = call_envs(envs, live, "step", [(scripted_reply(task_from_goal(obs[i]), obs[i]),) for i in live])
        for i in live:
            obs_i, reward, done, truncated, _ = got[i]
            if done or truncated:
                rewards[i] = reward
                del obs[i]
            else:
                obs[i] = obs_i
    assert rewards == {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}
