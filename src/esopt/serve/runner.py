"""ServeRunner: a generation's members played by a client over HTTP instead of by esopt's rollout.

The trainer calls ``play`` as for any runner. Here it publishes the generation (its members and
the episodes each must play) on the desk the HTTP routes read (serve/desk.py), then serves chat
requests until the client finishes the generation (serve/scheduler.py: which requests decode together,
under which weights), and returns the rewards the client posted. Everything that touches the model runs
in this, the training thread: requests wait in a queue while an update or an evaluation runs.

Posted rewards are also appended to RUN/serve/genNNNN.jsonl (serve/episodes.py), so a server killed
mid-generation and resumed (``esopt serve --resume RUN``) keeps them; the generation itself restarts from
the history (the last complete one).
"""
from __future__ import annotations

import math
import sys
import time

from ..train.runner import LocalRunner, Played
from ..utils.seeding import derive_seed
from .desk import STOPPING_LINE, Desk
from .episodes import Evaluation, Generation, posted_rewards, with_task_ids
from .jobs import Job
from .protocol import CENTER, ServeError
from .scheduler import Scheduler


class ServeRunner(LocalRunner):
    """Members played by an HTTP client (module docstring). ``server``: what starts and stops the HTTP
    server (serve/app.py), given the desk; ``missing``: the default for episodes without a reward at finish."""

    remote = False  # the model is this process's (train/session.py)
    command = "esopt serve"  # how a stopped run is continued (train/session.py stopped_line)

    def __init__(self, server=None, missing: str = "fail"):
        super().__init__()
        self.server, self.missing = server, missing
        self.desk = Desk()
        self.scheduler = Scheduler(self.desk)
        self.desk.load = self.scheduler.load
        self.finishing: Job | None = None  # the finish request whose record is being written

    def start(self, trainer) -> None:
        super().start(trainer)
        if not getattr(trainer, "moves_weights", True) or trainer.cfg.coevo.mode != "weights":
            raise ServeError(400, "esopt serve plays weights-only ES (coevo.mode=weights)")
        self.episodes_per_member = trainer.cfg.es.episodes_per_member
        self.desk.start(trainer)
        self.scheduler.trainer = trainer
        if self.server is not None:
            self.server.start(self.desk)

    def play(self, members, sigma, t, times, bar=None, contexts=None) -> Played:
        self._written()  # the previous generation's finish request learns its record
        tr = self.trainer
        gen = Generation(t=t, sigma=sigma, members=list(members), episodes_per_member=self.episodes_per_member,
                         tasks=self._tasks(t))
        t0 = time.time()
        tokens0 = tr.policy.tokens_generated
        try:
            played = self._publish(gen, f"generation {t}: serving {len(members)} members x "
                                        f"{self.episodes_per_member} episodes")
        finally:
            times["rollout"] += time.time() - t0
        played.tokens = tr.policy.tokens_generated - tokens0
        if bar is not None:
            bar.update(len(members))
        return played

    def evaluate(self, split, seed):
        """serve.evaluations=harness: the split's episodes published for the harness to play with center (the
        same seeds at every evaluation), their posted rewards the figures; otherwise played here by esopt."""
        tr = self.trainer
        if tr.cfg.serve.evaluations != "harness":
            return super().evaluate(split, seed)
        self._written()  # the generation just recorded answers its finish before the harness hears of this
        n = tr.cfg.tasks.heldout if split == "heldout" else tr.cfg.tasks.validation
        ev = Evaluation(t=len(tr.history.records), sigma=0.0, members=[], episodes_per_member=n,
                        tasks=self._eval_tasks(split, n), split=split)
        return self._publish(ev, f"{split} evaluation after {ev.t} updates: {n} episodes for the harness to play "
                                 f"with {CENTER}")

    def _publish(self, gen: Generation, what: str):
        """Publish a generation or an evaluation (with the rewards a killed server had already taken) and serve
        until it is finished; its Played, or an evaluation's (figures, episodes)."""
        tr = self.trainer
        for line in posted_rewards(tr.run.path, gen.file):
            if gen.owner(line["episode"]) is not None:
                gen.rewards[line["episode"]] = float(line["reward"])
                gen.metadata[line["episode"]] = line.get("metadata")
        self.desk.publish(gen)
        tr.log(f"[esopt] {what} ({len(gen.rewards)} rewards already posted)")
        try:
            return self.scheduler.serve(gen, lambda job: self._control(gen, job))
        finally:
            self.desk.ready.clear()

    def close(self) -> None:
        """The server's end. Called from the session's finally: with an exception on its way out (a stop asked
        for, a failure) the run is not over, and waiting clients hear 503 (retry once the run is resumed);
        after the last generation they hear 409 (training is over)."""
        self._written(final=True)
        stopping = sys.exc_info()[0] is not None
        self.desk.retire("stopping" if stopping else "finished")
        self.scheduler.fail_waiting(ServeError(503, STOPPING_LINE, "server_error") if stopping else
                                    ServeError(409, "training is over: nothing more is served"))
        if self.server is not None:
            self.server.stop()

    # -- finishing a generation ------------------------------------------------------------------
    def _control(self, gen: Generation, job: Job):
        """A finish or wake job taken by the scheduler: the generation's result if it can end now, else None."""
        finish = job if job.kind == "finish" else self.finishing
        if finish is None or finish.future.done():
            return None
        if finish.target is not gen:
            finish.future.set_exception(ServeError(409, f"{finish.target.kind} {finish.generation} is over"))
            return None
        return self._finish(gen, finish)

    def _finish(self, gen: Generation, job: Job) -> Played | None:
        """The generation's Played if it can end now; None while it waits for rewards (missing=wait)."""
        policy = job.request.missing or self.missing
        missing = gen.missing()
        if missing and policy == "fail":
            job.future.set_exception(ServeError(409, f"{len(missing)} of {len(gen.all_ids())} episodes of {gen.kind} "
                                                     f"{gen.t} have no reward yet (first: {missing[0]}); post them, or "
                                                     "finish with missing=wait or missing=failure_reward"))
            return None
        if missing and policy == "wait":
            self.finishing = job
            return None
        with self.desk.lock:
            failure = self.trainer.cfg.run.failure_reward
            for e in missing:
                gen.rewards[e] = failure
                gen.metadata[e] = {"missing": True}
            self.desk.gen, self.desk.state = None, "updating"
            self.desk.ready.clear()
        if gen.kind == "evaluation":  # nothing to record first: the figures are the answer
            stats, episodes = gen.result(missing, time.monotonic() - gen.since)
            job.future.set_result({"evaluation": gen.split, "generation": gen.t, "reward": stats["reward"],
                                   "reward_se": stats["reward_se"], "n": stats["n"], "finished": False})
            return stats, episodes
        self.finishing = job
        return self._played(gen, missing)

    def _played(self, gen: Generation, missing: list[str]) -> Played:
        rewards, traj = [], []
        for k, m in enumerate(gen.members):
            ids = [gen.episode_id(k, j) for j in range(gen.episodes_per_member)]
            rs = [gen.rewards[e] for e in ids]
            rewards.append(float(sum(rs) / len(rs)) if all(math.isfinite(r) for r in rs) else float("nan"))
            for j, e in enumerate(ids):
                meta = gen.metadata.get(e) or {}
                traj.append({"generation": gen.t, "member": m.index, "episode": e, "task": gen.tasks[j].get("task", e),
                             "observation0": "", "turns": [], "reward": gen.rewards[e], "done": True,
                             "solved": bool(meta.get("solved", False)), "error": "no reward posted" if e in missing
                             else None, "truncated": False, "metadata": meta})
        c = self.scheduler.counts_once()
        return Played(rewards, traj, {}, 0, {"served_requests": c["requests"], "served_batches": c["batches"],
                                             "served_rows_per_batch": c["rows"] / max(1, c["batches"]),
                                             "served_switches": c["switches"], "served_switch_s": c["switch_s"],
                                             "served_decode_s": c["decode_s"]})

    def _written(self, final: bool = False) -> None:
        """Answer the finish request of the generation just recorded (its history record is written)."""
        job, self.finishing = self.finishing, None
        if job is None or job.future.done():
            return
        records = self.trainer.history.records
        if len(records) <= job.generation:  # training stopped before this generation's record was written
            job.future.set_exception(ServeError(500, f"generation {job.generation}'s update was not recorded: "
                                                     "training stopped (the server's log says why); continue with "
                                                     f"esopt serve --resume {self.trainer.run.path}", "server_error"))
            return
        record, done = records[job.generation], len(records)
        job.future.set_result({"generation": job.generation, "weights_hash": record.get("weights_hash"),
                               "rewards": record.get("rewards"), "generations_done": done,
                               # with the harness's evaluations, the final one is still to come (close says it)
                               "finished": final or (done >= self.trainer.cfg.es.generations
                                                     and self.trainer.cfg.serve.evaluations != "harness")})

    # -- the episodes' tasks ---------------------------------------------------------------------
    def _tasks(self, t: int) -> list[dict]:
        """Per episode index: a seed a harness may pick its task by, and esopt's own task id where the
        config's env has a task source here (the same tasks for every member of the generation)."""
        tr = self.trainer
        key = t if tr.cfg.tasks.fresh_each_generation else 0
        out = [{"index": j, "seed": derive_seed("serve-task", tr.cfg.run.seed, key, j)}
               for j in range(self.episodes_per_member)]
        return with_task_ids(out, lambda: tr.tasks.train(self.episodes_per_member, t))

    def _eval_tasks(self, split: str, n: int) -> list[dict]:
        """Per evaluation episode: a seed the harness picks its task by (the same at every evaluation of the
        split), and esopt's task id where the config's env has a task source here."""
        tr = self.trainer
        skip = tr.cfg.tasks.heldout_skip if split == "heldout" else 0  # a fresh held-out set: the seeds after them
        out = [{"index": j, "split": split, "seed": derive_seed("serve-eval", tr.cfg.run.seed, split, skip + j)}
               for j in range(n)]
        return with_task_ids(out, getattr(tr.tasks, split))
