"""ServeRunner: a generation's members played by a client over HTTP instead of by esopt's rollout.

The trainer calls ``play`` as for any runner. Here it publishes the generation (its members and
the episodes each must play), then serves chat requests until the client finishes the
generation, and returns the rewards the client posted. Everything that touches the model runs in
this, the training thread: requests wait in a queue while an update or an evaluation runs.

Which weights answer a request:
- full-rank noise: the requested member's perturbation is applied in place and kept while its
  requests come; another member's request restores it first (perturb/restore are exact), and the
  ``center`` is the restored weights. Requests of one member (and equal decoding settings) that
  wait together are decoded in one batch, the member in place's first; a member whose episodes
  are not all rewarded keeps the weights after each batch while its clients play the turn, for as
  long as a switch takes (measured: perturb + restore; STICKY_S at least, MAX_STICKY_S at most).
  Not waiting costs a switch away and, when its clients come back, one back; waiting costs at most
  one switch's time. So a generation switches about once per member, as esopt's own rollout does. Shared
  prompt prefixes are encoded once per member in place (models/prefix.py's PrefixStore).
- low-rank noise (es.noise=lowrank, others frozen): nothing is perturbed in place; waiting requests
  of all members decode together, one member per batch row (its side terms), as a local rollout does.
- low-rank noise with es.lowrank_others=full: a member's other tensors are perturbed in place (as
  full-rank, switched the same way) and its linear weights are side terms of its rows.

Posted rewards are also appended to RUN/serve/genNNNN.jsonl, so a server killed mid-generation
and resumed (``esopt serve --resume RUN``) keeps them; the generation itself restarts from the
history (the last complete one).
"""
from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import copy
import json
import math
import queue
import threading
import time
from dataclasses import dataclass, field

import torch

from ..models.policy import DecodeAborted, Sampling
from ..train import stop
from ..train.members import batched
from ..train.evaluate import summarize
from ..train.runner import LocalRunner, Played
from ..utils.jsonl import strict_dumps
from ..utils.seeding import derive_seed
from .limits import Limits, model_positions
from .protocol import CENTER, ChatRequest, FinishPost, RewardPost, ServeError, completion, cut_at_stop, member_index

BATCH_WAIT_S = 0.005  # a batch waits for more requests while they arrive less than this apart (up to STICKY_S)
STICKY_S = 0.05  # how long the next batch waits for the clients just answered (at least)
MAX_STICKY_S = 1.0  # full-rank: a member in place waits for its clients up to one switch's cost, at most this
STARVE_S = 30.0  # a request waiting this long is served next, even if that means a switch
# replies are decoded this many tokens at a time: between slices, requests that wait go first (a reply's rows
# go back to the queue with what they decoded, keys/values kept in a TurnCache, and continue after them)
SLICE_TOKENS = 64


@dataclass
class _Job:
    kind: str  # chat | finish | wake | stop
    request: object = None
    generation: int | None = None
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    since: float = field(default_factory=time.monotonic)
    deadline: float = math.inf  # a chat: answered by then (serve.request_timeout_s) or refused with 504
    gone: threading.Event = field(default_factory=threading.Event)  # a chat whose client disconnected
    parts: list | None = None  # a chat being decoded in slices: per reply, [token ids so far, finished]
    prompt_tokens: int = 0
    paused_at: float = 0.0  # when its last slice ended
    target: object = None  # a finish: the generation or evaluation it was sent for

    def dropped(self) -> bool:
        """Nobody waits for this chat's answer any longer (its client left, or its time is up)."""
        return self.gone.is_set() or time.monotonic() > self.deadline

    def drop(self) -> None:
        if not self.future.done():
            self.future.set_exception(ServeError(504, "the reply was not decoded within serve.request_timeout_s "
                                                      f"({self.deadline - self.since:g} s)", "server_error")
                                      if not self.gone.is_set() else ServeError(499, "the client disconnected"))


@dataclass
class Generation:
    """One generation as served: its members, the episodes each plays, and the rewards posted so far."""

    t: int
    sigma: float
    members: list
    episodes_per_member: int
    tasks: list[dict]  # per episode index j: {"index", "seed", "task" (esopt's task id, where it has one)}
    rewards: dict = field(default_factory=dict)  # episode id -> reward
    metadata: dict = field(default_factory=dict)  # episode id -> the client's metadata

    kind = "generation"

    @property
    def file(self) -> str:  # RUN/serve/<file>.jsonl: the rewards posted, kept across a kill
        return f"gen{self.t:04d}"

    def episode_id(self, k: int, j: int) -> str:
        return f"g{self.t}-m{k}-e{j}"

    def player(self, episode: str) -> str:
        """The model an assigned episode is played with."""
        return f"member-{self.owner(episode)[0]}"

    def owner(self, episode: str) -> tuple[int, int] | None:
        """(member, episode index) of an episode id of this generation, else None."""
        try:
            g, m, e = episode.split("-")
            t, k, j = int(g[1:]), int(m[1:]), int(e[1:])
        except ValueError:
            return None
        if (g[0], m[0], e[0]) != ("g", "m", "e") or t != self.t or not (0 <= k < len(self.members)) \
                or not (0 <= j < self.episodes_per_member) or episode != self.episode_id(k, j):
            return None
        return k, j

    def all_ids(self) -> list[str]:
        return [self.episode_id(k, j) for k in range(len(self.members)) for j in range(self.episodes_per_member)]

    def missing(self) -> list[str]:
        return [e for e in self.all_ids() if e not in self.rewards]

    def assignment(self) -> dict:
        return {"generation": self.t, "sigma": self.sigma, "episodes_per_member": self.episodes_per_member,
                "members": [f"member-{k}" for k in range(len(self.members))],
                "episodes": [{"id": self.episode_id(k, j), "member": f"member-{k}", **self.tasks[j]}
                             for k in range(len(self.members)) for j in range(self.episodes_per_member)],
                "rewarded": sorted(self.rewards), "missing": len(self.missing())}


@dataclass
class Evaluation(Generation):
    """An evaluation played by the harness (serve.evaluations=harness): the split's episodes, each played with
    ``center`` (the unperturbed weights after ``t`` updates); the same seeds at every evaluation."""

    split: str = "heldout"
    since: float = field(default_factory=time.monotonic)
    kind = "evaluation"

    @property
    def file(self) -> str:
        return f"{self.split}-gen{self.t:04d}"

    def episode_id(self, k: int, j: int) -> str:
        return f"{self.split}-g{self.t}-e{j}"

    def owner(self, episode: str) -> tuple[int, int] | None:
        head, sep, index = episode.rpartition("-e")
        if not sep or head != f"{self.split}-g{self.t}" or not index.isdigit():
            return None
        j = int(index)
        return (0, j) if 0 <= j < self.episodes_per_member and episode == self.episode_id(0, j) else None

    def player(self, episode: str) -> str:
        return CENTER

    def all_ids(self) -> list[str]:
        return [self.episode_id(0, j) for j in range(self.episodes_per_member)]

    def assignment(self) -> dict:
        return {"kind": "evaluation", "split": self.split, "generation": self.t, "members": [],
                "episodes": [{"id": self.episode_id(0, j), "member": CENTER, **self.tasks[j]}
                             for j in range(self.episodes_per_member)],
                "rewarded": sorted(self.rewards), "missing": len(self.missing())}

    def result(self, missing: list[str], seconds: float) -> tuple[dict, list[dict]]:
        """(figures, episode records) as esopt's own evaluation gives them (train/evaluate.py)."""
        episodes = []
        for j, e in enumerate(self.all_ids()):
            meta = self.metadata.get(e) or {}
            episodes.append({"task": self.tasks[j].get("task", f"{self.split}-{j}"), "episode": e, "player": "harness",
                             "observation0": "", "turns": [], "reward": self.rewards[e], "done": True,
                             "solved": bool(meta.get("solved", False)), "truncated": False, "metadata": meta,
                             "error": "no reward posted" if e in missing else None})
        stats = summarize(episodes)
        stats["seconds"] = seconds
        return stats, episodes


class ServeRunner(LocalRunner):
    """Members played by an HTTP client (module docstring). ``server``: what starts and stops the HTTP
    server (serve/app.py), given this runner; ``missing``: the default for episodes without a reward at finish."""

    remote = False  # the model is this process's (train/session.py)
    command = "esopt serve"  # how a stopped run is continued (train/session.py stopped_line)

    def __init__(self, server=None, missing: str = "fail"):
        super().__init__()
        self.server, self.missing = server, missing
        self.jobs: queue.Queue[_Job] = queue.Queue()
        self.lock = threading.Lock()  # guards gen, rewards and the state below (HTTP threads and the trainer's)
        self.ready = threading.Event()  # a generation is published
        self.gen: Generation | None = None
        self.state = "starting"  # starting | playing | updating | finished
        self.finishing: _Job | None = None  # the finish request whose record is being written
        self.requests = 0
        self.pending: collections.deque[_Job] = collections.deque()  # chat requests taken from the queue
        self.control: collections.deque[_Job] = collections.deque()  # finish and wake jobs taken from the queue
        self.store = None  # shared prefixes encoded under the weights in place (models/prefix.py)
        self.counts = collections.Counter()  # this generation's batches, rows, switches and seconds
        self.switched = [0, 0.0]  # switches made and their seconds, over the whole run (_sticky_s)
        self.limits: Limits | None = None  # serve.* admission limits (serve/limits.py), set at start
        self.counter = None  # a tokenizer of the HTTP side's own, to count prompt tokens (check_prompt)
        self.count_lock = threading.Lock()
        self.turns = None  # keys/values of chats decoded in slices (this generation's weights only)
        self.decoding = 0  # chat requests in the batch being decoded now

    # -- the trainer's side ----------------------------------------------------------------------
    def start(self, trainer) -> None:
        super().start(trainer)
        es = trainer.cfg.es
        if not getattr(trainer, "moves_weights", True) or trainer.cfg.coevo.mode != "weights":
            raise ServeError(400, "esopt serve plays weights-only ES (coevo.mode=weights)")
        self.episodes_per_member = es.episodes_per_member
        self.limits = Limits.of(trainer.cfg, model_positions(trainer.policy.model))
        # a copy: HF fast tokenizers refuse concurrent use, and the model thread's keeps encoding batches
        self.counter = copy.deepcopy(trainer.policy.tokenizer)
        if self.server is not None:
            self.server.start(self)

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
        for line in self._posted(gen.file):
            if gen.owner(line["episode"]) is not None:
                gen.rewards[line["episode"]] = float(line["reward"])
                gen.metadata[line["episode"]] = line.get("metadata")
        with self.lock:
            self.gen, self.state = gen, "playing"
        self.ready.set()
        tr.log(f"[esopt] {what} ({len(gen.rewards)} rewards already posted)")
        weights = contextlib.ExitStack()
        self.turns = tr.policy.new_turn_cache()  # keys/values are of these weights only
        try:
            return self._serve(gen, weights)
        finally:
            weights.close()  # the center again, whatever happened
            self.turns = None
            self.ready.clear()

    def close(self) -> None:
        self._written(final=True)
        with self.lock:
            self.state, self.gen = "finished", None
        self.ready.set()  # start requests waiting now hear that training is over
        self._fail_waiting(ServeError(409, "training is over: nothing more is served"))
        if self.server is not None:
            self.server.stop()

    # -- the HTTP side (called from the server's threads) -----------------------------------------
    def submit_chat(self, req: ChatRequest) -> _Job:
        k = member_index(req.model)
        with self.lock:
            if self.state == "finished":
                raise ServeError(409, "training is over: nothing more is served")
            gen = self.gen
            if k is not None:
                if gen is not None and gen.kind == "evaluation":
                    raise ServeError(409, f"{req.model} is not served now: the {gen.split} evaluation after {gen.t} "
                                          f"updates is being played, with {CENTER}")
                if gen is None:
                    raise ServeError(409, f"{req.model} is not being played: no generation is in progress (start one "
                                          "with POST /es/generation/start)")
                if k >= len(gen.members):
                    raise ServeError(404, f"unknown model {req.model!r}: generation {gen.t} has members 0 to "
                                          f"{len(gen.members) - 1}")
            job = _Job("chat", req, None if gen is None else gen.t)
            job.deadline = job.since + self.limits.timeout_s
        self.jobs.put(job)
        return job

    def assignment(self, wait_s: float = 600.0) -> dict:
        """The generation being played (its members and episodes); waits for the next one to be published."""
        deadline = time.time() + wait_s
        while True:
            ready = self.ready.wait(max(0.0, deadline - time.time()))
            with self.lock:
                if self.gen is not None:
                    return self.gen.assignment()
                if self.state == "finished":
                    raise ServeError(409, "training is over: no generation to play")
            if not ready or time.time() >= deadline:
                raise ServeError(503, "no generation is being played now (the server is updating or evaluating); "
                                      "POST /es/generation/start waits for the next one", "server_error")
            time.sleep(0.01)  # published and finished meanwhile: wait for the next

    def check_prompt(self, req: ChatRequest) -> None:
        """The prompt's tokens plus the reply's budget within the model's positions (an HTTP thread's work)."""
        if self.limits.positions is None:
            return
        text = self.counter.apply_chat_template(req.conversation(), add_generation_prompt=True, tokenize=False)
        with self.count_lock:
            n = len(self.counter(text, add_special_tokens=False)["input_ids"])
        self.limits.check_prompt(req, n)

    def post_reward(self, post: RewardPost) -> dict:
        self.limits.check_reward(post)
        with self.lock:
            gen = self.gen
            if gen is None:
                raise ServeError(409, f"no generation is in progress: episode {post.episode!r} cannot take a reward now")
            owner = gen.owner(post.episode)
            if owner is None:
                raise ServeError(404, f"episode {post.episode!r} was not assigned in {gen.kind} {gen.t} (ids look "
                                      f"like {gen.episode_id(0, 0)}; GET /es/generation lists them)")
            if post.member is not None and post.member != gen.player(post.episode):
                raise ServeError(400, f"episode {post.episode!r} belongs to {gen.player(post.episode)}, not "
                                      f"{post.member}")
            if post.episode in gen.rewards:
                raise ServeError(409, f"episode {post.episode!r} already has a reward ({gen.rewards[post.episode]}); "
                                      "each episode takes one")
            self._persist(gen.file, {"episode": post.episode, "reward": post.reward, "metadata": post.metadata})
            gen.rewards[post.episode] = post.reward
            gen.metadata[post.episode] = post.metadata
            left = len(gen.missing())
        self.jobs.put(_Job("wake"))  # a finish waiting for the last rewards
        return {"episode": post.episode, "generation": gen.t, "missing": left}

    def submit_finish(self, post: FinishPost) -> concurrent.futures.Future:
        with self.lock:
            if self.gen is None:
                raise ServeError(409, "no generation is in progress to finish")
            job = _Job("finish", post, self.gen.t, target=self.gen)
        self.jobs.put(job)
        return job.future

    def status(self) -> dict:
        with self.lock:
            gen = self.gen
            return {"state": self.state, "generation": None if gen is None else gen.t,
                    "generations": self.trainer.cfg.es.generations if self.trainer else None,
                    "missing": None if gen is None else len(gen.missing()), "requests": self.requests,
                    "chats_waiting": self.jobs.qsize() + len(self.pending) + self.decoding,  # about: the queue
                    "run": str(self.trainer.run.path) if self.trainer else None}

    # -- inside play ---------------------------------------------------------------------------
    def _serve(self, gen: Generation, weights: contextlib.ExitStack) -> Played:
        """Serve chat requests until the generation is finished. Waiting chat requests go to
        self.pending; the next batch is the member in place's requests (no switch) unless the oldest
        request has waited STARVE_S, else the oldest request's member. With full-rank noise, a member
        whose requests were just answered and whose episodes are not all rewarded keeps the weights
        for up to one switch's time while its client plays the turn (_sticky_s). With
        low-rank rows, the next batch waits up to STICKY_S for the clients just answered (their next
        request or their reward), so clients that started apart do not stay in two half batches."""
        current = [CENTER]  # whose weights are in place now
        self.store = self.trainer.policy.new_prefix_store()  # prefixes encoded under the weights in place
        while True:
            if stop.requested():  # Ctrl-C / SIGTERM while the client plays: the generation is not recorded
                raise stop.Stopped(gen.t)  # (its posted rewards are kept in RUN/serve/)
            if self.control:
                job = self.control.popleft()
                finish = job if job.kind == "finish" else self.finishing
                if finish is None or finish.future.done():
                    continue
                if finish.target is not gen:
                    finish.future.set_exception(ServeError(409, f"{finish.target.kind} {finish.generation} is over"))
                    continue
                played = self._finish(gen, finish)
                if played is not None:
                    return played
            elif self.pending:
                self._take(STICKY_S, gap_s=BATCH_WAIT_S)  # requests that come with it decode with it
                who, answered = self._answer(gen, weights, current)
                if who == "rows":  # low-rank: the clients just answered play their turn and join the next batch
                    back = [0]

                    def returned(job):  # their next request, or a reward: that episode is over
                        back[0] += job.kind in ("chat", "wake")
                        return back[0] >= answered
                    self._take(STICKY_S, returned)
                elif who is not None and who == current[0] and self._owes(gen, who) \
                        and not any(member_index(j.request.model) == who for j in self.pending):
                    self._take(self._sticky_s(), lambda j: j.kind == "chat" and member_index(j.request.model) == who)
            else:
                self._take(0.5, lambda j: True)

    def _take(self, wait_s: float, until=None, gap_s: float | None = None) -> int:
        """Move jobs from the queue to self.pending (chats) and self.control (the rest), waiting up to
        wait_s, or until a job for which until(job) holds arrives, or (gap_s) until none has arrived
        for gap_s; how many were taken."""
        start = time.monotonic()
        deadline, n = start + (wait_s if gap_s is None else min(wait_s, gap_s)), 0
        while True:
            try:
                job = self.jobs.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return n
            n += 1
            (self.pending if job.kind == "chat" else self.control).append(job)
            if until is not None and until(job):
                return n
            if gap_s is not None:  # requests still arriving: keep the batch open a little longer
                deadline = min(start + wait_s, time.monotonic() + gap_s)

    def _sticky_s(self) -> float:
        """How long a member in place waits for its clients: a switch's mean measured time, bounded."""
        if not self.switched[0]:
            return STICKY_S
        return min(MAX_STICKY_S, max(STICKY_S, self.switched[1] / self.switched[0]))

    def _rows(self) -> bool:
        return batched(self.trainer.perturber)

    def _owes(self, gen: Generation, k) -> bool:
        """Member k has episodes without a reward (its client may be playing one)."""
        with self.lock:
            return any(gen.episode_id(k, j) not in gen.rewards for j in range(gen.episodes_per_member))

    def _finish(self, gen: Generation, job: _Job) -> Played | None:
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
        with self.lock:
            failure = self.trainer.cfg.run.failure_reward
            for e in missing:
                gen.rewards[e] = failure
                gen.metadata[e] = {"missing": True}
            self.gen, self.state = None, "updating"
            self.ready.clear()
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
        c, self.counts = self.counts, collections.Counter()
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

    def _key(self, job: _Job) -> tuple:
        """Requests with equal keys decode in one batch: same weights (the member, or any member as rows
        with low-rank noise) and the same decoding settings."""
        r, who = job.request, member_index(job.request.model)
        return ("rows" if self._rows() and who is not None else who, r.temperature, r.top_p, self.limits.reply_tokens(r),
                tuple(r.stops()), r.ignore_eos)

    def _answer(self, gen: Generation, weights: contextlib.ExitStack, current: list):
        """Decode one batch of the waiting chat requests (_serve's docstring says which); the weights'
        owner it ran under (a member index, CENTER or "rows") and how many requests it answered.
        Requests not started go before ones continuing from a slice (SLICE_TOKENS), unless one of those
        has waited STARVE_S since its slice: a long reply holds the others back one slice at most."""
        live = []
        for job in self.pending:
            if job.dropped():
                self._forget(job)
                job.drop()
            elif job.generation is not None and job.generation != gen.t and member_index(job.request.model) is not None:
                self._forget(job)
                job.future.set_exception(ServeError(409, f"{job.request.model} of generation {job.generation} is no "
                                                         f"longer served: generation {gen.t} is being played"))
            else:
                live.append(job)
        if not live:
            self.pending.clear()
            return None, 0
        now = time.monotonic()
        fresh = [job for job in live if job.parts is None]
        waiting = [job for job in live if job.parts is not None]
        starving = [job for job in waiting if now - job.paused_at >= STARVE_S]
        live = starving + fresh + [job for job in waiting if job not in starving]
        keys = [self._key(job) for job in live]
        pick = keys[0]  # the oldest request's
        if not starving and fresh and now - live[0].since < STARVE_S:  # no switch while none starves
            pick = next((k for k, job in zip(keys, live) if k[0] == current[0] and job.parts is None), pick)
        batch, rest, rows = [], [], 0
        for job, key in zip(live, keys):
            n = job.request.n if job.parts is None else sum(not done for _, done in job.parts)
            if key == pick and (not batch or rows + n <= self.trainer.policy.batch_size):
                batch.append(job)
                rows += n
            else:
                rest.append(job)
        self.pending = collections.deque(rest)
        self.decoding = len(batch)
        try:
            self._decode(gen, batch, pick, weights, current)
        except DecodeAborted:  # every request of the batch was dropped, or a stop was asked for: none answered
            for job in batch:
                self._forget(job)
                if job.dropped():
                    job.drop()
                elif not job.future.done():
                    job.future.set_exception(ServeError(503, "the server is stopping", "server_error"))
        except Exception as err:  # one batch failing fails its requests only
            for job in batch:
                self._forget(job)
                if not job.future.done():
                    job.future.set_exception(ServeError(500, f"generation failed: {type(err).__name__}: {err}",
                                                        "server_error"))
        finally:
            self.decoding = 0
        return pick[0], len(batch)

    def _forget(self, job: _Job) -> None:
        """Drop the keys/values a sliced chat kept."""
        if job.parts is not None and self.turns is not None:
            self.turns.drop([(id(job), i) for i in range(len(job.parts))])

    def _decode(self, gen: Generation, jobs: list[_Job], key: tuple, weights: contextlib.ExitStack,
                current: list) -> None:
        """One slice of the batch's replies: SLICE_TOKENS more tokens of each, or to its end (its token budget,
        end of turn or a stop string); the requests whose replies all ended are answered, the others go back
        to the queue with their tokens so far. A reply is the same however many slices it took (each slice's
        seed is the request's and the tokens decoded before it), whoever was served between them."""
        tr = self.trainer
        who, temperature, top_p, max_new, stops, ignore_eos = key
        rows = []  # (job, reply index) of every reply not yet ended
        for job in jobs:
            if job.parts is None:
                job.parts = [[[], False] for _ in range(job.request.n)]
            rows += [(job, i) for i, (_, done) in enumerate(job.parts) if not done]
        convs = [job.request.conversation() for job, _ in rows]
        tails = [job.parts[i][0] for job, i in rows]
        extra = {}
        if who == "rows":  # low-rank: one member per row, nothing in place
            members = [gen.members[member_index(job.request.model)] for job, _ in rows]
            slot = {id(m): s for s, m in enumerate(dict.fromkeys(members))}
            used = list(dict.fromkeys(members))
            row_member = torch.tensor([slot[id(m)] for m in members])
            seeds, scales = [m.seed for m in used], [m.sign * gen.sigma for m in used]
            extra = {"row_context": lambda idx: tr.perturber.side_terms(seeds, scales, row_member[idx]),
                     "row_groups": [slot[id(m)] for m in members]}
        else:
            in_place = tr.perturber.play_mode == "in_place"
            if who != current[0]:  # the member's perturbation in place, the previous one restored
                t0 = time.perf_counter()
                weights.close()
                current[0] = CENTER
                if who is not None:
                    m = gen.members[who]
                    perturbed = tr.perturber.perturbed if in_place else tr.perturber.others_perturbed
                    weights.enter_context(perturbed(m.seed, gen.sigma, m.sign))
                    current[0] = who
                self.store = tr.policy.new_prefix_store()  # the old one's keys/values are of other weights
                took = time.perf_counter() - t0
                self.counts["switches"] += 1
                self.counts["switch_s"] += took
                self.switched = [self.switched[0] + 1, self.switched[1] + took]
            if who is not None and not in_place:  # es.lowrank_others=full: its linear weights as side terms
                m, one = gen.members[who], torch.zeros(len(convs), dtype=torch.long)
                extra = {"row_context": lambda idx: tr.perturber.side_terms([m.seed], [m.sign * gen.sigma], one[idx]),
                         "row_groups": [0] * len(convs)}
            else:
                extra["prefix_store"] = self.store
        seed = jobs[0].request.seed
        if seed is None:
            seed = derive_seed("serve", tr.cfg.run.seed, gen.t, self.requests)
        left = max(max_new - len(tail) for tail in tails)
        budget = min(left, SLICE_TOKENS)
        if any(tails):  # a continued slice: a seed of its own, the earlier slices' keys/values reused
            seed = derive_seed("serve-slice", seed, sum(map(len, tails)))
        if left > SLICE_TOKENS or any(tails):
            extra["tails"] = tails
            if self.turns is not None:
                extra.update(turn_cache=self.turns, cache_keys=[(id(job), i) for job, i in rows])
        if ignore_eos:
            extra["ignore_eos"] = True
        ids: list = []
        stop_at = (lambda text: any(s in text for s in stops)) if stops else None
        t0 = time.perf_counter()
        # asked every decode step: a Ctrl-C / SIGTERM, or no client of the batch waiting any longer, ends it
        abort = lambda: stop.requested() or all(job.dropped() for job in jobs)  # noqa: E731
        tr.policy.generate(convs, budget, Sampling(temperature, top_p), seed=seed, token_ids=ids, stop=stop_at,
                           abort=abort, **extra)
        self.counts["decode_s"] += time.perf_counter() - t0
        self.counts["batches"] += 1
        self.counts["rows"] += len(convs)
        tok = tr.policy.tokenizer
        eos = tok.eos_token_id
        for (job, i), tail, (p_ids, r_ids) in zip(rows, tails, ids):
            if not tail:
                job.prompt_tokens = len(p_ids)
            made = (tail + r_ids)[:max_new]
            text = tok.decode(made, skip_special_tokens=True)
            ended = bool(made and made[-1] == eos) or len(made) >= max_new  # else: at a stop string, or more to come
            if stops and not ended:
                ended = cut_at_stop(text, list(stops))[1]
            job.parts[i] = [made, ended]
        now = time.monotonic()
        for job in jobs:
            if not all(done for _, done in job.parts):  # its next slice comes after the requests that wait
                job.paused_at = now
                self.pending.append(job)
                continue
            self._forget(job)
            outs, finish, made = [], [], 0
            for r_ids, _ in job.parts:
                text, stopped = cut_at_stop(tok.decode(r_ids, skip_special_tokens=True), list(stops))
                outs.append(text)
                finish.append("stop" if stopped or (r_ids and r_ids[-1] == eos) or len(r_ids) < max_new else "length")
                made += len(r_ids)
            self.requests += 1
            self.counts["requests"] += 1
            job.future.set_result(completion(job.request.model, outs, finish, job.prompt_tokens, made))

    def _tasks(self, t: int) -> list[dict]:
        """Per episode index: a seed a harness may pick its task by, and esopt's own task id where the
        config's env has a task source here (the same tasks for every member of the generation)."""
        tr = self.trainer
        key = t if tr.cfg.tasks.fresh_each_generation else 0
        out = [{"index": j, "seed": derive_seed("serve-task", tr.cfg.run.seed, key, j)}
               for j in range(self.episodes_per_member)]
        return _with_task_ids(out, lambda: tr.tasks.train(self.episodes_per_member, t))

    def _eval_tasks(self, split: str, n: int) -> list[dict]:
        """Per evaluation episode: a seed the harness picks its task by (the same at every evaluation of the
        split), and esopt's task id where the config's env has a task source here."""
        tr = self.trainer
        out = [{"index": j, "split": split, "seed": derive_seed("serve-eval", tr.cfg.run.seed, split, j)}
               for j in range(n)]
        return _with_task_ids(out, getattr(tr.tasks, split))

    def _persist(self, name: str, line: dict) -> None:
        folder = self.trainer.run.path / "serve"
        folder.mkdir(exist_ok=True)
        with open(folder / f"{name}.jsonl", "a", encoding="utf-8") as f:
            f.write(strict_dumps(line) + "\n")

    def _posted(self, name: str) -> list[dict]:
        path = self.trainer.run.path / "serve" / f"{name}.jsonl"
        if not path.exists():
            return []
        lines = []
        for raw in path.read_text(encoding="utf-8").splitlines():
            try:
                lines.append(json.loads(raw))
            except ValueError:  # a line torn by a kill: that reward was never acknowledged
                continue
        return lines

    def _fail_waiting(self, error: ServeError) -> None:
        for job in [*self.pending, *self.control]:
            if not job.future.done():
                job.future.set_exception(error)
        self.pending.clear()
        self.control.clear()
        while True:
            try:
                job = self.jobs.get_nowait()
            except queue.Empty:
                return
            if not job.future.done():
                job.future.set_exception(error)


def _with_task_ids(rows: list[dict], split) -> list[dict]:
    """rows with esopt's task id of each episode, from split() -> (envs, ids, observations), where the config's
    env has a task source here; as they are where it has none (the harness has its own tasks)."""
    try:
        _, ids, _ = split()
    except Exception:  # an env esopt cannot build here
        return rows
    for row, task in zip(rows, ids):
        row["task"] = task
    return rows
