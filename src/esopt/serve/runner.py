"""ServeRunner: a generation's members played by a client over HTTP instead of by esopt's rollout.

The trainer calls ``play`` as for any runner. Here it publishes the generation (its members and
the episodes each must play), then serves chat requests until the client finishes the
generation, and returns the rewards the client posted. Everything that touches the model runs in
this, the training thread: requests wait in a queue while an update or an evaluation runs.

Which weights answer a request:
- full-rank noise: the requested member's perturbation is applied in place and kept while its
  requests come; another member's request restores it first (perturb/restore are exact), and the
  ``center`` is the restored weights. Requests of one member (and equal decoding settings) that
  wait together are decoded in one batch.
- low-rank noise (es.noise=lowrank, others frozen): nothing is perturbed in place; waiting requests
  of all members decode together, one member per batch row (its side terms), as a local rollout does.

Posted rewards are also appended to RUN/serve/genNNNN.jsonl, so a server killed mid-generation
and resumed (``esopt serve --resume RUN``) keeps them; the generation itself restarts from the
history (the last complete one).
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import json
import math
import queue
import threading
import time
from dataclasses import dataclass, field

import torch

from ..models.policy import Sampling
from ..train import stop
from ..train.members import batched
from ..train.runner import LocalRunner, Played
from ..utils.seeding import derive_seed
from .protocol import CENTER, ChatRequest, FinishPost, RewardPost, ServeError, completion, cut_at_stop, member_index

BATCH_WAIT_S = 0.005  # after a request arrives, how long to wait for others to decode with it


@dataclass
class _Job:
    kind: str  # chat | finish | wake | stop
    request: object = None
    generation: int | None = None
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


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

    def episode_id(self, k: int, j: int) -> str:
        return f"g{self.t}-m{k}-e{j}"

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

    # -- the trainer's side ----------------------------------------------------------------------
    def start(self, trainer) -> None:
        super().start(trainer)
        es = trainer.cfg.es
        if not getattr(trainer, "moves_weights", True) or trainer.cfg.coevo.mode != "weights":
            raise ServeError(400, "esopt serve plays weights-only ES (coevo.mode=weights)")
        if trainer.perturber.play_mode == "rows+others":
            raise ServeError(400, "esopt serve: es.noise=lowrank needs es.lowrank_others=frozen here (members "
                                  "batched as rows); or use full-rank noise")
        self.episodes_per_member = es.episodes_per_member
        if self.server is not None:
            self.server.start(self)

    def play(self, members, sigma, t, times, bar=None, contexts=None) -> Played:
        self._written()  # the previous generation's finish request learns its record
        tr = self.trainer
        gen = Generation(t=t, sigma=sigma, members=list(members), episodes_per_member=self.episodes_per_member,
                         tasks=self._tasks(t))
        for line in self._posted(t):  # rewards a killed server had already taken
            if gen.owner(line["episode"]) is not None:
                gen.rewards[line["episode"]] = float(line["reward"])
                gen.metadata[line["episode"]] = line.get("metadata")
        with self.lock:
            self.gen, self.state = gen, "playing"
        self.ready.set()
        tr.log(f"[esopt] generation {t}: serving {len(members)} members x {self.episodes_per_member} episodes "
               f"({len(gen.rewards)} rewards already posted)")
        t0 = time.time()
        tokens0 = tr.policy.tokens_generated
        weights = contextlib.ExitStack()
        try:
            played = self._serve(gen, weights)
        finally:
            weights.close()  # the center again, whatever happened
            self.ready.clear()
            times["rollout"] += time.time() - t0
        played.tokens = tr.policy.tokens_generated - tokens0
        if bar is not None:
            bar.update(len(members))
        return played

    def close(self) -> None:
        self._written(final=True)
        with self.lock:
            self.state, self.gen = "finished", None
        self.ready.set()  # start requests waiting now hear that training is over
        self._fail_waiting(ServeError(409, "training is over: nothing more is served"))
        if self.server is not None:
            self.server.stop()

    # -- the HTTP side (called from the server's threads) -----------------------------------------
    def submit_chat(self, req: ChatRequest) -> concurrent.futures.Future:
        k = member_index(req.model)
        with self.lock:
            if self.state == "finished":
                raise ServeError(409, "training is over: nothing more is served")
            gen = self.gen
            if k is not None:
                if gen is None:
                    raise ServeError(409, f"{req.model} is not being played: no generation is in progress (start one "
                                          "with POST /es/generation/start)")
                if k >= len(gen.members):
                    raise ServeError(404, f"unknown model {req.model!r}: generation {gen.t} has members 0 to "
                                          f"{len(gen.members) - 1}")
            req.stops()  # checked before it waits in the queue
            job = _Job("chat", req, None if gen is None else gen.t)
        self.jobs.put(job)
        return job.future

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

    def post_reward(self, post: RewardPost) -> dict:
        with self.lock:
            gen = self.gen
            if gen is None:
                raise ServeError(409, f"no generation is in progress: episode {post.episode!r} cannot take a reward now")
            owner = gen.owner(post.episode)
            if owner is None:
                raise ServeError(404, f"episode {post.episode!r} was not assigned in generation {gen.t} (ids look "
                                      f"like {gen.episode_id(0, 0)}; GET /es/generation lists them)")
            if post.member is not None and post.member != f"member-{owner[0]}":
                raise ServeError(400, f"episode {post.episode!r} belongs to member-{owner[0]}, not {post.member}")
            if post.episode in gen.rewards:
                raise ServeError(409, f"episode {post.episode!r} already has a reward ({gen.rewards[post.episode]}); "
                                      "each episode takes one")
            self._persist(gen.t, {"episode": post.episode, "reward": post.reward, "metadata": post.metadata})
            gen.rewards[post.episode] = post.reward
            gen.metadata[post.episode] = post.metadata
            left = len(gen.missing())
        self.jobs.put(_Job("wake"))  # a finish waiting for the last rewards
        return {"episode": post.episode, "generation": gen.t, "missing": left}

    def submit_finish(self, post: FinishPost) -> concurrent.futures.Future:
        with self.lock:
            if self.gen is None:
                raise ServeError(409, "no generation is in progress to finish")
            job = _Job("finish", post, self.gen.t)
        self.jobs.put(job)
        return job.future

    def status(self) -> dict:
        with self.lock:
            gen = self.gen
            return {"state": self.state, "generation": None if gen is None else gen.t,
                    "generations": self.trainer.cfg.es.generations if self.trainer else None,
                    "missing": None if gen is None else len(gen.missing()), "requests": self.requests,
                    "run": str(self.trainer.run.path) if self.trainer else None}

    # -- inside play ---------------------------------------------------------------------------
    def _serve(self, gen: Generation, weights: contextlib.ExitStack) -> Played:
        current = [CENTER]  # whose weights are in place now
        while True:
            try:
                job = self.jobs.get(timeout=0.5)
            except queue.Empty:
                if stop.requested():  # Ctrl-C / SIGTERM while the client plays: the generation is not recorded
                    raise stop.Stopped(gen.t) from None  # (its posted rewards are kept in RUN/serve/)
                continue
            if job.kind == "chat":
                chats = [job] + self._more_chats()
                self._answer(gen, chats, weights, current)
            elif job.kind in ("finish", "wake"):
                finish = job if job.kind == "finish" else self.finishing
                if finish is None or finish.future.done():
                    continue
                if finish.generation != gen.t:
                    finish.future.set_exception(ServeError(409, f"generation {finish.generation} is over"))
                    continue
                played = self._finish(gen, finish)
                if played is not None:
                    return played

    def _more_chats(self) -> list[_Job]:
        """Chat requests that arrive within BATCH_WAIT_S, to decode together; other jobs go back in order."""
        got, others = [], []
        deadline = time.time() + BATCH_WAIT_S
        while True:
            try:
                job = self.jobs.get(timeout=max(0.0, deadline - time.time()))
            except queue.Empty:
                break
            (got if job.kind == "chat" else others).append(job)
            if len(got) >= self.trainer.policy.batch_size:
                break
        for job in others:
            self.jobs.put(job)
        return got

    def _finish(self, gen: Generation, job: _Job) -> Played | None:
        """The generation's Played if it can end now; None while it waits for rewards (missing=wait)."""
        policy = job.request.missing or self.missing
        missing = gen.missing()
        if missing and policy == "fail":
            job.future.set_exception(ServeError(409, f"{len(missing)} of {len(gen.all_ids())} episodes of generation "
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
        return Played(rewards, traj, {}, 0, {"served_requests": self.requests})

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
                               "finished": final or done >= self.trainer.cfg.es.generations})

    def _answer(self, gen: Generation, chats: list[_Job], weights: contextlib.ExitStack, current: list) -> None:
        """Decode the waiting chat requests: grouped by decoding settings, and by member unless members
        decode as rows (low-rank)."""
        live = []
        for job in chats:
            if job.generation is not None and job.generation != gen.t and member_index(job.request.model) is not None:
                job.future.set_exception(ServeError(409, f"{job.request.model} of generation {job.generation} is no "
                                                         f"longer served: generation {gen.t} is being played"))
            else:
                live.append(job)
        rows = batched(self.trainer.perturber)
        groups: dict[tuple, list[_Job]] = {}
        for job in live:
            r = job.request
            who = member_index(r.model)
            key = ("rows" if rows and who is not None else who, r.temperature, r.top_p, self._max_new(r),
                   tuple(r.stops()))
            groups.setdefault(key, []).append(job)
        # the weights in place now first: fewer switches
        for key in sorted(groups, key=lambda k: k[0] != current[0]):
            try:
                self._decode(gen, groups[key], key, weights, current)
            except Exception as err:  # one batch failing fails its requests only
                for job in groups[key]:
                    if not job.future.done():
                        job.future.set_exception(ServeError(500, f"generation failed: {type(err).__name__}: {err}",
                                                            "server_error"))

    def _max_new(self, r: ChatRequest) -> int:
        return r.max_completion_tokens or r.max_tokens or self.trainer.cfg.agent.max_new_tokens

    def _decode(self, gen: Generation, jobs: list[_Job], key: tuple, weights: contextlib.ExitStack,
                current: list) -> None:
        tr = self.trainer
        who, temperature, top_p, max_new, stops = key
        convs, owners = [], []
        for job in jobs:
            for _ in range(job.request.n):
                convs.append(job.request.conversation())
                owners.append(job)
        extra = {}
        if who == "rows":  # low-rank: one member per row, nothing in place
            members = [gen.members[member_index(job.request.model)] for job in owners]
            slot = {id(m): s for s, m in enumerate(dict.fromkeys(members))}
            used = list(dict.fromkeys(members))
            row_member = torch.tensor([slot[id(m)] for m in members])
            seeds, scales = [m.seed for m in used], [m.sign * gen.sigma for m in used]
            extra = {"row_context": lambda idx: tr.perturber.side_terms(seeds, scales, row_member[idx]),
                     "row_groups": [slot[id(m)] for m in members]}
        elif who != current[0]:  # full-rank: the member's perturbation in place, the previous one restored
            weights.close()
            current[0] = CENTER
            if who is not None:
                m = gen.members[who]
                weights.enter_context(tr.perturber.perturbed(m.seed, gen.sigma, m.sign))
                current[0] = who
        seed = jobs[0].request.seed
        if seed is None:
            seed = derive_seed("serve", tr.cfg.run.seed, gen.t, self.requests)
        ids: list = []
        stop = (lambda text: any(s in text for s in stops)) if stops else None
        texts = tr.policy.generate(convs, max_new, Sampling(temperature, top_p), seed=seed, token_ids=ids, stop=stop,
                                   **extra)
        eos = tr.policy.tokenizer.eos_token_id
        at = 0
        for job in jobs:
            n = job.request.n
            outs, finish, prompt, made = [], [], 0, 0
            for text, (p_ids, r_ids) in zip(texts[at : at + n], ids[at : at + n]):
                text, stopped = cut_at_stop(text, list(stops))
                outs.append(text)
                finish.append("stop" if stopped or (r_ids and r_ids[-1] == eos) or len(r_ids) < max_new else "length")
                prompt, made = len(p_ids), made + len(r_ids)
            at += n
            self.requests += 1
            job.future.set_result(completion(job.request.model, outs, finish, prompt, made))

    def _tasks(self, t: int) -> list[dict]:
        """Per episode index: a seed a harness may pick its task by, and esopt's own task id where the
        config's env has a task source here (the same tasks for every member of the generation)."""
        tr = self.trainer
        key = t if tr.cfg.tasks.fresh_each_generation else 0
        out = [{"index": j, "seed": derive_seed("serve-task", tr.cfg.run.seed, key, j)}
               for j in range(self.episodes_per_member)]
        try:
            _, ids, _ = tr.tasks.train(self.episodes_per_member, t)
        except Exception:  # an env esopt cannot build here: the harness has its own tasks
            return out
        for row, task in zip(out, ids):
            row["task"] = task
        return out

    def _persist(self, t: int, line: dict) -> None:
        folder = self.trainer.run.path / "serve"
        folder.mkdir(exist_ok=True)
        with open(folder / f"gen{t:04d}.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    def _posted(self, t: int) -> list[dict]:
        path = self.trainer.run.path / "serve" / f"gen{t:04d}.jsonl"
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
        while True:
            try:
                job = self.jobs.get_nowait()
            except queue.Empty:
                return
            if not job.future.done():
                job.future.set_exception(error)
