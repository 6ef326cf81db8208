"""Browser episodes in worker processes (``env.options.web.workers`` > 1).

A browser step is mostly waiting: on chromium (layout, scripts) and on
Playwright's round trips, and BrowserGym's observation extraction runs in the
calling Python process. One process steps its episodes one after another, so
with ``workers: N`` every episode's env lives in one of N worker processes
instead, each with its own shared browser (esopt.envs.browser.browser), and the
rollout starts the resets and steps of all live episodes before it waits for
any of them (agent.rollout's ``start_*``/``finish_*`` protocol).

:class:`RemoteEnv` is the TextEnv the rollout holds: it takes an env id and
the arguments of ``make(env_id, ...)``, builds that env in a worker when its
episode starts (on the least busy worker then), forwards ``reset``/``step`` and
frees the worker's env when the episode ends. The worker runs nothing but
esopt's own env code; the model stays in the parent. An exception in a worker
comes back as :class:`WorkerError` with the worker's traceback (that episode
fails, the others go on). A worker that dies (a crashed browser taking it down,
a kill) fails the episodes it held and is replaced by a fresh process when the
next episode starts. Results do not depend on the number of workers: every
episode is seeded by its task and seed alone.
"""
from __future__ import annotations

import atexit
import itertools
import multiprocessing
import traceback
from typing import Any

from ..base import TextEnv

_POOLS: dict[int, "WorkerPool"] = {}  # workers -> this process's pool


class WorkerError(RuntimeError):
    """An env call raised in a worker process (the message holds the worker's traceback)."""


class WorkerDied(RuntimeError):
    """The worker process holding an episode's env is gone."""


def _serve(conn) -> None:
    """A worker's loop: (request id, command, env key, payload) in, (request id, ok, result) out."""
    from .. import make
    from .browser import close_shared_browsers

    envs: dict[int, TextEnv] = {}
    while True:
        try:
            rid, cmd, key, payload = conn.recv()
        except (EOFError, KeyboardInterrupt):
            break
        if cmd == "quit":
            break
        try:
            if cmd == "reset":
                env_id, kwargs, seed = payload
                env = envs.get(key)
                if env is None:
                    env = envs[key] = make(env_id, **kwargs)
                result: Any = env.reset(seed)
            elif cmd == "step":
                result = envs[key].step(payload)
                if result[2] or result[3]:  # the episode is over: its context is closed already
                    envs.pop(key, None)
            elif cmd == "close":
                env = envs.pop(key, None)
                result = env.close() if env is not None else None
            else:
                raise ValueError(f"unknown worker command {cmd!r}")
            reply = (rid, True, result)
        except BaseException:
            if cmd in ("reset", "step"):  # the env ended its episode on the way out
                envs.pop(key, None)
            reply = (rid, False, traceback.format_exc())
        conn.send(reply)
    for env in envs.values():
        try:
            env.close()
        except Exception:
            pass
    close_shared_browsers(stop_playwright=True)


class _Worker:
    def __init__(self, ctx, index: int):
        self.index = index
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child,), name=f"esopt-browser-{index}", daemon=True)
        self.proc.start()
        child.close()
        self.ids = itertools.count()
        self.replies: dict[int, tuple] = {}  # arrived replies not yet collected
        self.episodes = 0  # episodes whose env lives here now

    def alive(self) -> bool:
        return self.proc.is_alive()

    def send(self, cmd: str, key: int, payload=None) -> int:
        rid = next(self.ids)
        try:
            self.conn.send((rid, cmd, key, payload))
        except (OSError, ValueError) as err:
            raise self._died() from err
        return rid

    def receive(self, rid: int):
        while rid not in self.replies:
            try:
                got = self.conn.recv()
            except (EOFError, OSError) as err:
                raise self._died() from err
            self.replies[got[0]] = got
        _, ok, result = self.replies.pop(rid)
        if not ok:
            raise WorkerError(f"in browser worker {self.index}:\n{result}")
        return result

    def _died(self) -> WorkerDied:
        self.proc.join(timeout=1)
        return WorkerDied(f"browser worker {self.index} (pid {self.proc.pid}) died, exit code {self.proc.exitcode}")

    def stop(self) -> None:
        try:
            self.conn.send((-1, "quit", -1, None))
        except (OSError, ValueError):
            pass
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()


class WorkerPool:
    """``n`` worker processes (spawned on first use, replaced when dead)."""

    def __init__(self, n: int):
        if n < 1:
            raise ValueError(f"env.options.web.workers must be >= 1, got {n}")
        self.ctx = multiprocessing.get_context("spawn")  # never fork a process that holds torch threads
        self.slots: list[_Worker | None] = [None] * n

    def acquire(self) -> _Worker:
        """The worker with the fewest episodes, started (again) if it is not running."""
        for k, w in enumerate(self.slots):
            if w is None or not w.alive():
                if w is not None:
                    w.conn.close()
                self.slots[k] = _Worker(self.ctx, k)
        worker = min(self.slots, key=lambda w: w.episodes)
        worker.episodes += 1
        return worker

    def close(self) -> None:
        for w in self.slots:
            if w is not None:
                w.stop()
        self.slots = [None] * len(self.slots)


def worker_pool(n: int) -> WorkerPool:
    """This process's pool of ``n`` browser workers."""
    pool = _POOLS.get(n)
    if pool is None:
        pool = _POOLS[n] = WorkerPool(n)
    return pool


@atexit.register
def close_worker_pools() -> None:
    """Stop every worker process this process started (end of a run, tests)."""
    for pool in _POOLS.values():
        pool.close()
    _POOLS.clear()


_KEYS = itertools.count()


class RemoteEnv(TextEnv):
    """``make(env_id, **kwargs)`` played in a worker process of ``pool`` (the kwargs must pickle)."""

    def __init__(self, pool: WorkerPool, env_id: str = "browsergym", **kwargs):
        self.pool, self.env_id, self.kwargs = pool, env_id, kwargs
        self.max_turns = kwargs.get("max_turns") or 10
        self.key = next(_KEYS)
        self.worker: _Worker | None = None
        self.pending: int | None = None
        self.observation = ""

    # -- the rollout's concurrent protocol: start everything, then finish each ----------------
    def start_reset(self, seed: int | None = None) -> None:
        self._release()
        self.worker = self.pool.acquire()
        self.pending = self.worker.send("reset", self.key, (self.env_id, self.kwargs, seed))

    def finish_reset(self) -> tuple[str, dict]:
        obs, info = self._finish()
        self.observation = obs
        return obs, info

    def start_step(self, action: str) -> None:
        if self.worker is None:
            raise RuntimeError("step() outside an episode: call reset() first")
        self.pending = self.worker.send("step", self.key, action)

    def finish_step(self) -> tuple[str, float, bool, bool, dict]:
        result = self._finish()
        self.observation = result[0]
        if result[2] or result[3]:
            self._release(ended=True)
        return result

    def _finish(self):
        worker, rid, self.pending = self.worker, self.pending, None
        if worker is None or rid is None:
            raise RuntimeError("nothing was started")
        try:
            return worker.receive(rid)
        except BaseException:  # the worker dropped the env (or died): the episode is over
            self._release(ended=True)
            raise

    def _release(self, ended: bool = False) -> None:
        worker, self.worker = self.worker, None
        if worker is None:
            return
        worker.episodes -= 1
        if not ended and worker.alive():
            try:
                worker.receive(worker.send("close", self.key))
            except (WorkerError, WorkerDied):
                pass

    # -- the plain TextEnv interface ---------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.start_reset(seed)
        return self.finish_reset()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.start_step(action)
        return self.finish_step()

    def render_text(self) -> str:
        return self.observation

    def close(self) -> None:
        if self.pending is not None:  # a call still under way: collect it first
            try:
                self._finish()
            except Exception:
                pass
        self._release()
