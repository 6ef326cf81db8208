"""RayRunner: the trainer's MemberRunner on Ray workers, one model replica each.

Per generation the driver (the training process) sends units of members (a member is its
index, seed and sign: a few dozen bytes) to whichever worker is free, and gets back rewards,
episodes and timings. It then applies the update to its own copy of the weights while every
worker applies the same update from the same seeds, and compares each worker's weights hash
with its own: a mismatch stops the run, naming the replica and the generation.

A worker that dies (its process killed, its node lost) costs no result: its unit goes back to
the queue, to the next free worker, and a replacement starts that replays the history to the
current generation, hash-verified, before it takes work. A unit whose worker died
MAX_ATTEMPTS times is recorded as failed (worst reward), like a member whose episode raised,
which is recorded once and never retried.
"""
from __future__ import annotations

import math
import os
import pickle
import time
from collections import deque
from dataclasses import dataclass, field

from ...es.perturb import weights_hash
from ..evaluate import summarize
from ..members import new_times, work_units
from ..runner import Played
from ...envs.spec import env_import_path
from .cluster import Plan, connect, import_ray, local_cores, plan_workers
from .errors import ReplicaError, ReplicaMismatchError
from .replica import Replica, replay_records

MAX_ATTEMPTS = 3  # workers that may die under one unit before its members count as failed
START_WAIT_S = 60  # log a line when Ray has not placed a worker after this long


@dataclass(eq=False)  # a worker is itself: compared by identity
class Worker:
    index: int
    actor: object
    starting: object | None  # the ref of its info() call until it answered
    info: dict = field(default_factory=dict)


@dataclass
class Job:
    method: str
    args: tuple
    size: int = 1  # members (for the progress bar)
    attempts: int = 0


class RayRunner:
    driver_device = "cpu"  # the driver's copy only applies updates and hashes: host memory, no GPU
    driver_threads = 1  # and leaves the cores to the workers

    def __init__(self, workers: int | None = None, address: str | None = None, log=print):
        """workers: how many replicas (None: one per GPU, else as many as the cores fit);
        address: an existing cluster ("auto", "host:port"), None: a local instance started here."""
        if workers is not None and workers < 1:
            from ...config import ConfigError

            raise ConfigError(f"--workers must be at least 1, got {workers}")
        import_ray()  # a missing Ray is one line, before a run folder exists
        self.workers, self.address, self.log = workers, address, log
        self.trainer = None
        self.plan: Plan | None = None
        self.pool: list[Worker] = []
        self.started_ray = False
        self.next_index = 0
        self.replaced = 0
        self.bytes = {"sent": 0, "received": 0, "start": 0}

    # ------------------------------------------------------------------ set-up
    def start(self, trainer) -> None:
        """Connect to Ray and plan the workers; they start when first needed (play, evaluate)."""
        ray = import_ray()
        self.trainer = trainer
        cfg = trainer.cfg
        self.started_ray = connect(self.address, local_cores(), self.log)
        res = ray.cluster_resources()
        self.plan = plan_workers(self.workers, cfg.runtime.threads, res.get("CPU", 0), res.get("GPU", 0),
                                 cfg.runtime.device.startswith("cuda"), self.log)
        self.actor_class = ray.remote(max_restarts=0)(Replica)
        p = self.plan
        self.log(f"[esopt] Ray: {p.workers} worker(s) x {p.threads} thread(s)" + (" + 1 GPU" if p.gpus else "")
                 + f", each with one replica of {cfg.model}")

    def _spawn(self) -> Worker:
        """A new replica, started from the base model and the history as it stands now."""
        tr = self.trainer
        records = replay_records(tr.history.records)
        rollout = None if tr.rollout_fn is _default_rollout() else tr.rollout_fn
        env = {"ESOPT_CACHE": os.environ["ESOPT_CACHE"]} if "ESOPT_CACHE" in os.environ else {}
        env |= env_import_path(tr.cfg.env.id)
        # the config travels as plain data: a replica rebuilds it, importing the env where it runs
        args = (tr.cfg.model_dump(mode="json"), self.next_index, self.plan.threads, tr.history.meta["base_weights_hash"],
                records, rollout, env)
        self.bytes["start"] += _size(args)
        actor = self.actor_class.options(num_cpus=self.plan.threads, num_gpus=self.plan.gpus).remote(*args)
        worker = Worker(self.next_index, actor, actor.info.remote())
        self.next_index += 1
        self.pool.append(worker)
        return worker

    def _fill(self) -> None:
        while len(self.pool) < self.plan.workers:
            self._spawn()

    def _started(self, worker: Worker, replace: bool = True) -> None:
        ray = import_ray()
        try:
            worker.info = ray.get(worker.starting)
        except ray.exceptions.RayActorError as err:
            worker.starting = None
            self._lost(worker, err, replace)
            return
        worker.starting = None
        i = worker.info
        self.log(f"[esopt] Ray replica {i['index']} ready on {i['host']} (pid {i['pid']}, {i['threads']} thread(s), "
                 f"{i['device']}; loaded in {i['load_s']:.1f}s, replayed {i['generations']} generation(s) in "
                 f"{i['replay_s']:.1f}s, hash verified)")

    def _lost(self, worker: Worker, err, replace: bool = True) -> None:
        """A worker died: drop it and (outside an update) start a replacement at the current generation."""
        if getattr(err, "actor_init_failed", False):  # an error in its constructor: it would fail again
            raise ReplicaError(f"Ray replica {worker.index} could not start: {_last_line(err)}") from None
        if worker in self.pool:
            self.pool.remove(worker)
        self.replaced += 1
        if self.replaced > 10 * self.plan.workers:
            raise ReplicaError(f"Ray workers keep dying ({self.replaced} lost, the last replica {worker.index}: "
                               f"{_first_line(err)}); see the Ray logs (/tmp/ray/session_latest/logs)")
        line = f"[esopt] Ray replica {worker.index} died ({_first_line(err)})"
        if replace:
            new = self._spawn()
            line += (f"; its work goes to the next free worker, and replica {new.index} starts, replaying "
                     f"{len(self.trainer.history.records)} generation(s)")
        self.log(line)

    # -------------------------------------------------------------- scheduling
    def _run(self, jobs: list[Job], on_done=None) -> list:
        """Each job to whichever worker is free; a job whose worker died goes to the next free one.
        Returns the results in job order (None for a job that lost MAX_ATTEMPTS workers)."""
        ray = import_ray()
        self._fill()
        todo, results, running = deque(range(len(jobs))), [None] * len(jobs), {}
        waited = 0.0
        while todo or running:
            busy = {id(w) for _, w in running.values()}
            for w in [w for w in self.pool if w.starting is None and id(w) not in busy]:
                if not todo:
                    break
                j = todo.popleft()
                self.bytes["sent"] += _size(jobs[j].args)
                running[getattr(w.actor, jobs[j].method).remote(*jobs[j].args)] = (j, w)
            starting = {w.starting: w for w in self.pool if w.starting is not None}
            if not running and not starting:
                self._fill()
                continue
            done, _ = ray.wait(list(running) + list(starting), num_returns=1, timeout=START_WAIT_S)
            if not done:
                waited += START_WAIT_S
                if not running:
                    self.log(f"[esopt] Ray: waited {waited:.0f}s for workers to start; each needs "
                             f"{self.plan.threads} CPU(s)" + (" and a GPU" if self.plan.gpus else "")
                             + " free on a node (`ray status` shows what the cluster has)")
                continue
            ref = done[0]
            if ref in starting:
                self._started(starting[ref])
                continue
            j, w = running.pop(ref)
            try:
                results[j] = ray.get(ref)
            except ray.exceptions.RayActorError as err:
                self._lost(w, err)
                jobs[j].attempts += 1
                if jobs[j].attempts < MAX_ATTEMPTS:
                    todo.appendleft(j)
                elif on_done:
                    on_done(j, None)
                continue
            self.bytes["received"] += _size(results[j])
            if on_done:
                on_done(j, results[j])
        return results

    # ------------------------------------------------------------- the runner
    def play(self, members, sigma, t, times, bar=None, contexts=None) -> Played:
        if contexts is not None:
            raise ValueError("coevo.mode context/both runs in one process for now, not on Ray workers")
        tr = self.trainer
        size = tr.cfg.es.members_per_rollout or math.ceil(len(members) / self.plan.workers)
        units = work_units(members, tr.cfg, tr.perturber, batch=size)
        # a unit travels as its Member objects: a member's context (co-evolution) rides on its Member,
        # and Replica.play hands it to the same play_unit as a local run
        jobs = [Job("play", (unit, sigma, t, len(members)), len(unit)) for unit in units]
        sent0, received0 = self.bytes["sent"], self.bytes["received"]

        def done(j, result):
            if bar is not None:
                bar.update(jobs[j].size)

        t0 = time.time()
        results = self._run(jobs, done)
        wall = time.time() - t0
        rewards, traj, errors, tokens, busy = [], [], {}, 0, new_times()
        for unit, res in zip(units, results):
            if res is None:
                error = f"{MAX_ATTEMPTS} Ray workers died while playing this unit (members {[m.index for m in unit]})"
                self.log(f"[esopt] generation {t}: {error}; they count as failed")
                rewards += [float("nan")] * len(unit)
                errors.update({str(m.index): error for m in unit})
                continue
            rewards += res["rewards"]
            traj += res["traj"]
            errors.update(res["errors"])
            tokens += res["tokens"]
            for k, v in res["times"].items():
                busy[k] += v
        # the phases as wall-clock seconds: the play phase's wall time, split as the workers spent theirs
        total = sum(busy.values())
        for k, v in busy.items():
            times[k] = wall * v / total if total else (wall if k == "rollout" else 0.0)
        extra = {"workers": len(self.pool), "replica_busy_s": total,
                 "ray_bytes_sent": self.bytes["sent"] - sent0, "ray_bytes_received": self.bytes["received"] - received0}
        return Played(rewards, traj, errors, tokens, extra)

    def update(self, t, seeds, coefs, alpha, population, times) -> str:
        """The update on every replica (also those still starting: theirs runs after the replay) while
        the driver applies it to its own copy; then every replica's hash against the driver's."""
        ray = import_ray()
        tr = self.trainer
        args = ([int(s) for s in seeds], [float(c) for c in coefs], float(alpha), int(population))
        pending = [(w, w.actor.update.remote(t, *args)) for w in self.pool]
        self.bytes["sent"] += _size(args) * len(pending)
        t0 = time.time()
        tr.perturber.apply_update(*args)
        times["update"] = time.time() - t0
        t0 = time.time()
        digest = weights_hash(tr.model)
        times["hash"] = time.time() - t0
        t0 = time.time()
        for w, ref in pending:
            if w.starting is not None:  # its update runs after its replay: take its start first
                self._started(w, replace=False)
                if w not in self.pool:
                    continue
            try:
                got = ray.get(ref)
            except ray.exceptions.RayActorError as err:
                self._lost(w, err, replace=False)  # replaced at the next play, from the history with this generation
                continue
            if got != digest:
                raise ReplicaMismatchError(
                    f"Ray replica {w.index} has weights hash {got[:12]} after generation {t}, the driver {digest[:12]}: "
                    f"replicas must be identical (same esopt, torch and dtype on every node); generation {t} was not "
                    f"recorded, `esopt train --resume {tr.run.path}` redoes it")
        times["sync"] = time.time() - t0
        return digest

    def evaluate(self, split, seed):
        """A split's episodes in slices across the workers (slices of whole decoding batches where the
        split has more than one), joined in order."""
        tr = self.trainer
        n = len(getattr(tr.tasks, split)()[1])
        size = math.ceil(n / self.plan.workers)
        bs = tr.cfg.agent.batch_size
        if size > bs:
            size = math.ceil(size / bs) * bs
        slices = [(lo, min(lo + size, n)) for lo in range(0, n, size)]
        t0 = time.time()
        results = self._run([Job("evaluate", (split, seed, lo, hi)) for lo, hi in slices])
        lost = [s for s, r in zip(slices, results) if r is None]
        if lost:
            raise ReplicaError(f"evaluation on the {split} split: {MAX_ATTEMPTS} Ray workers died playing "
                               f"episodes {lost[0][0]}..{lost[0][1] - 1}")
        episodes = [ep for part in results for ep in part]
        stats = summarize(episodes)
        stats["seconds"] = time.time() - t0
        return stats, episodes

    # ------------------------------------------------------------ inspection
    def worker_info(self) -> list[dict]:
        """Each live worker's info() now (peak RSS, generations, ...)."""
        ray = import_ray()
        self._run([])  # waits for nothing, but starts the pool if it is not yet
        return ray.get([w.actor.info.remote() for w in self.pool])

    def close(self) -> None:
        """Stop the workers (and the Ray instance, if this runner started it)."""
        if self.trainer is None:
            return
        ray = import_ray()
        for w in self.pool:
            try:
                ray.kill(w.actor)
            except Exception:  # already gone
                pass
        self.pool = []
        if self.started_ray and ray.is_initialized():
            ray.shutdown()
        self.started_ray = False


def _default_rollout():
    from ..evaluate import run_episodes

    return run_episodes


def _size(obj) -> int:
    """Pickled bytes of a payload: what a call or its result puts on the wire, give or take Ray's framing."""
    try:
        return len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # e.g. a test's rollout function, which Ray pickles by value
        return 0


def _last_line(err) -> str:
    """The exception line at the end of a remote traceback."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return lines[-1] if lines else type(err).__name__


def _first_line(err) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return lines[0] if lines else type(err).__name__
