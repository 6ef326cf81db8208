"""The model thread of esopt serve: which waiting chat requests decode together, under which weights.

Requests of one model (a member, or ``center``) and equal decoding settings (one DecodeOptions) that
wait together are decoded in one batch. How a batch gets its weights is train/member_weights.py's
answer, the same as a local rollout's:
- full-rank noise: the requested member's perturbation is applied in place and kept while its
  requests come; another member's request restores it first (perturb/restore are exact), and the
  ``center`` is the restored weights. The member in place's requests go first; a member whose episodes
  are not all rewarded keeps the weights after each batch while its clients play the turn, for as
  long as a switch takes (measured: perturb + restore; STICKY_S at least, MAX_STICKY_S at most).
  Not waiting costs a switch away and, when its clients come back, one back; waiting costs at most
  one switch's time. So a generation switches about once per member, as esopt's own rollout does. Shared
  prompt prefixes are encoded once per member in place (models/prefix.py's PrefixStore).
- low-rank noise (es.noise=lowrank, others frozen): nothing is perturbed in place; waiting requests
  of all members decode together, one member per batch row (its side terms), as a local rollout does.
- low-rank noise with es.lowrank_others=full: a member's other tensors are perturbed in place (as
  full-rank, switched the same way) and its linear weights are side terms of its rows.

Replies are decoded SLICE_TOKENS tokens at a time: between slices, requests that wait go first; a
reply's rows go back to the queue with what they decoded and continue from their keys/values (kept in a
TurnCache: a continued slice encodes no token of its prompt or of its reply so far again).
"""
from __future__ import annotations

import collections
import contextlib
import queue
import time

from ..models.decode import Caches
from ..models.policy import DecodeAborted
from ..train import stop
from ..train.member_weights import batched, member_weights
from ..utils.seeding import derive_seed
from .desk import STOPPING_LINE
from .jobs import Job
from .protocol import CENTER, ServeError, member_index

BATCH_WAIT_S = 0.005  # a batch waits for more requests while they arrive less than this apart (up to STICKY_S)
STICKY_S = 0.05  # how long the next batch waits for the clients just answered (at least)
MAX_STICKY_S = 1.0  # full-rank: a member in place waits for its clients up to one switch's cost, at most this
STARVE_S = 30.0  # a request waiting this long is served next, even if that means a switch
SLICE_TOKENS = 64  # replies are decoded this many tokens at a time (the module docstring says why)


class Scheduler:
    """Serves the desk's chat requests with the trainer's model until a control job (a finish) ends the
    generation. counts: this generation's batches, rows, switches and seconds (drained by counts_once)."""

    def __init__(self, desk):
        self.desk, self.jobs = desk, desk.jobs
        self.trainer = None
        self.pending: collections.deque[Job] = collections.deque()  # chat requests taken from the queue
        self.control: collections.deque[Job] = collections.deque()  # finish and wake jobs taken from the queue
        self.counts = collections.Counter()
        self.switched = [0, 0.0]  # switches made and their seconds, over the whole run (_sticky_s)
        self.turns = None  # keys/values of chats decoded in slices (this generation's weights only)
        self.store = None  # shared prefixes encoded under the weights in place (models/prefix.py)
        self.decoding = 0  # chat requests in the batch being decoded now
        self.weights = contextlib.ExitStack()  # the in-place perturbation of the member in place
        self.current = CENTER  # whose weights are in place now

    def load(self) -> int:
        return len(self.pending) + self.decoding

    def counts_once(self) -> collections.Counter:
        c, self.counts = self.counts, collections.Counter()
        return c

    def serve(self, gen, on_control):
        """Serve chat requests until on_control(a finish or wake job) returns something, and return that. The
        next batch is the member in place's requests (no switch) unless the oldest request has waited STARVE_S,
        else the oldest request's member. With full-rank noise, a member whose requests were just answered and
        whose episodes are not all rewarded keeps the weights for up to one switch's time while its client plays
        the turn (_sticky_s). With low-rank rows, the next batch waits up to STICKY_S for the clients just
        answered (their next request or their reward), so clients that started apart do not stay in two half
        batches. The weights are the center again when it returns, whatever happened."""
        policy = self.trainer.policy
        self.turns, self.store, self.current = policy.new_turn_cache(), policy.new_prefix_store(), CENTER
        try:
            while True:
                if stop.requested():  # Ctrl-C / SIGTERM while the client plays: the generation is not recorded
                    raise stop.Stopped(gen.t)  # (its posted rewards are kept in RUN/serve/)
                if self.control:
                    done = on_control(self.control.popleft())
                    if done is not None:
                        return done
                elif self.pending:
                    self._take(STICKY_S, gap_s=BATCH_WAIT_S)  # requests that come with it decode with it
                    self._after(gen, *self._answer(gen))
                else:
                    self._take(0.5, lambda j: True)
        finally:
            self.weights.close()
            self.turns = None

    def _after(self, gen, who, answered: int) -> None:
        """Wait a little for the clients just answered, so their next requests decode together (serve's docstring)."""
        if who == "rows":  # low-rank: the clients just answered play their turn and join the next batch
            back = [0]

            def returned(job):  # their next request, or a reward: that episode is over
                back[0] += job.kind in ("chat", "wake")
                return back[0] >= answered
            self._take(STICKY_S, returned)
        elif who is not None and who == self.current and self.desk.owes(gen, who) \
                and not any(member_index(j.request.model) == who for j in self.pending):
            self._take(self._sticky_s(), lambda j: j.kind == "chat" and member_index(j.request.model) == who)

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

    def _key(self, job: Job) -> tuple:
        """Requests with equal keys decode in one batch: same weights (the member, or any member as rows
        with low-rank noise) and the same decoding options."""
        who = member_index(job.request.model)
        rows = batched(self.trainer.perturber) and who is not None
        return ("rows" if rows else who, self.desk.limits.decode_options(job.request))

    def _answer(self, gen):
        """Decode one batch of the waiting chat requests (serve's docstring says which); the weights'
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
            pick = next((k for k, job in zip(keys, live) if k[0] == self.current and job.parts is None), pick)
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
            self._decode(gen, batch, pick)
        except DecodeAborted:  # every request of the batch was dropped, or a stop was asked for: none answered
            for job in batch:
                self._forget(job)
                if job.dropped():
                    job.drop()
                elif not job.future.done():
                    job.future.set_exception(ServeError(503, STOPPING_LINE, "server_error"))
        except Exception as err:  # one batch failing fails its requests only
            for job in batch:
                self._forget(job)
                if not job.future.done():
                    job.future.set_exception(ServeError(500, f"generation failed: {type(err).__name__}: {err}",
                                                        "server_error"))
        finally:
            self.decoding = 0
        return pick[0], len(batch)

    def _forget(self, job: Job) -> None:
        """Drop the keys/values a sliced chat kept."""
        if job.parts is not None and self.turns is not None:
            self.turns.drop([(id(job), i) for i in range(len(job.parts))])

    def _switch(self, who, in_place) -> None:
        """The weights of `who` (a member index, or None: the center) in place (entering in_place), the previous
        member's restored."""
        if who == self.current:
            return
        t0 = time.perf_counter()
        self.weights.close()
        self.current = CENTER
        if who is not None:
            self.weights.enter_context(in_place)
            self.current = who
        self.store = self.trainer.policy.new_prefix_store()  # the old one's keys/values are of other weights
        took = time.perf_counter() - t0
        self.counts["switches"] += 1
        self.counts["switch_s"] += took
        self.switched = [self.switched[0] + 1, self.switched[1] + took]

    def _row_weights(self, gen, rows: list, who):
        """(RowWeights or None, the prefix store to use) of a batch's rows: side terms of their members (low-rank),
        after the member's in-place weights are switched to (the other modes)."""
        if who == "rows":  # low-rank: one member per row, nothing in place
            members = [gen.members[member_index(job.request.model)] for job, _ in rows]
            used = list(dict.fromkeys(members))
            slot = {id(m): s for s, m in enumerate(used)}
            return member_weights(self.trainer.perturber, used, gen.sigma, [slot[id(m)] for m in members]).rows, None
        # one member in place (full-rank), or its other tensors in place and its linear weights as side terms of its
        # rows (es.lowrank_others=full); None: the center
        weights = member_weights(self.trainer.perturber, [] if who is None else [gen.members[who]], gen.sigma,
                                 [0] * len(rows))
        self._switch(who, weights.in_place)
        return weights.rows, (self.store if weights.rows is None else None)

    def _decode(self, gen, jobs: list[Job], key: tuple) -> None:
        """One slice of the batch's replies: SLICE_TOKENS more tokens of each, or to its end (its token budget,
        end of turn or a stop string); the requests whose replies all ended are answered, the others go back
        to the queue with their tokens so far. A reply is the same however many slices it took (each slice's
        seed is the request's and the tokens decoded before it), whoever was served between them."""
        tr = self.trainer
        who, options = key
        rows = []  # (job, reply index) of every reply not yet ended
        for job in jobs:
            if job.parts is None:
                job.parts = [[[], False] for _ in range(job.request.n)]
            rows += [(job, i) for i, (_, done) in enumerate(job.parts) if not done]
        convs = [job.request.conversation(self.desk.tools_format) for job, _ in rows]  # with their tools
        tails = [job.parts[i][0] for job, i in rows]
        weights, prefixes = self._row_weights(gen, rows, who)
        seed = jobs[0].request.seed
        if seed is None:
            seed = derive_seed("serve", tr.cfg.run.seed, gen.t, self.desk.requests)
        left = max(options.max_new_tokens - len(tail) for tail in tails)
        if any(tails):  # a continued slice: a seed of its own, the earlier slices' keys/values reused
            seed = derive_seed("serve-slice", seed, sum(map(len, tails)))
        sliced = left > SLICE_TOKENS or any(tails)
        caches = Caches(self.turns if sliced else None, [(id(job), i) for job, i in rows], prefixes)
        ids: list = []
        t0 = time.perf_counter()
        # asked every decode step: a Ctrl-C / SIGTERM, or no client of the batch waiting any longer, ends it
        abort = lambda: stop.requested() or all(job.dropped() for job in jobs)  # noqa: E731
        tr.policy.generate(convs, options.but(max_new_tokens=min(left, SLICE_TOKENS), seed=seed), rows=weights,
                           caches=caches, tails=tails if sliced else None, token_ids=ids, abort=abort)
        self.counts["decode_s"] += time.perf_counter() - t0
        self.counts["batches"] += 1
        self.counts["rows"] += len(convs)
        self._collect(jobs, rows, tails, ids, options)

    def _collect(self, jobs: list[Job], rows: list, tails: list, ids: list, options) -> None:
        """Each reply's tokens after this slice; the requests whose replies all ended answered, the others queued."""
        tok = self.trainer.policy.tokenizer
        for (job, i), tail, pair in zip(rows, tails, ids):
            job.extend(i, tail, pair, tok, options)
        now = time.monotonic()
        for job in jobs:
            if not job.finished():  # its next slice comes after the requests that wait
                job.paused_at = now
                self.pending.append(job)
                continue
            self._forget(job)
            self.desk.requests += 1
            self.counts["requests"] += 1
            job.future.set_result(job.completion(tok, options, self.desk.tools_format))

    def fail_waiting(self, error: ServeError) -> None:
        """Every job taken or queued, answered with `error` (the run is over)."""
        for job in [*self.pending, *self.control]:
            if not job.future.done():
                job.future.set_exception(error)
        self.pending.clear()
        self.control.clear()
        self.desk.fail_queued(error)
