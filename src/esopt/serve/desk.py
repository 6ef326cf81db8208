"""The HTTP side of esopt serve: what the server's threads may read and do while the model thread trains.

A Desk holds the generation (or evaluation) being played, the run's state and the queue of jobs for the
model thread, all under one lock. Its methods are what the routes of serve/app.py call: submit a chat
(queued for the scheduler, serve/scheduler.py), read the assignment, check a prompt's length with a
tokenizer of its own, post a reward (kept in RUN/serve/ before it is acknowledged), ask to finish, report
status. Nothing here touches the model.
"""
from __future__ import annotations

import concurrent.futures
import copy
import queue
import threading
import time

from ..models.policy import chat_text
from .episodes import Generation, append_reward
from .jobs import Job
from .limits import Limits, model_positions
from .protocol import CENTER, ChatRequest, FinishPost, RewardPost, ServeError, member_index
from .tools import run_format

# what a client hears when the run stops before it is over (a SIGTERM, a failure): a retry after the resume works
STOPPING_LINE = "the server is stopping before training is over: retry once the run is resumed (esopt serve --resume)"


class Desk:
    """State shared by the HTTP threads and the model thread. load() -> chats taken by the scheduler and not
    yet answered (for status)."""

    def __init__(self, load=lambda: 0):
        self.jobs: queue.Queue[Job] = queue.Queue()
        self.lock = threading.Lock()  # guards gen, rewards and state (HTTP threads and the trainer's)
        self.ready = threading.Event()  # a generation is published
        self.gen: Generation | None = None
        self.state = "starting"  # starting | playing | updating | finished
        self.requests = 0  # chats answered
        self.load = load
        self.limits: Limits | None = None  # serve.* admission limits (serve/limits.py), set at start
        self.counter = None  # a tokenizer of the HTTP side's own, to count prompt tokens (check_prompt)
        self.count_lock = threading.Lock()
        self.run_path = None
        self.generations = None  # es.generations of the run
        self.tools_format = "system"  # how a request's tools reach the prompt: agent.tools.format, resolved (start)

    def start(self, trainer) -> None:
        self.limits = Limits.of(trainer.cfg, model_positions(trainer.policy.model))
        # a copy: HF fast tokenizers refuse concurrent use, and the model thread's keeps encoding batches
        self.counter = copy.deepcopy(trainer.policy.tokenizer)
        self.run_path, self.generations = trainer.run.path, trainer.cfg.es.generations
        self.tools_format = run_format(trainer.cfg, trainer.policy.tokenizer)

    # -- the model thread's side -----------------------------------------------------------------
    def publish(self, gen: Generation) -> None:
        with self.lock:
            self.gen, self.state = gen, "playing"
        self.ready.set()

    def retire(self, state: str) -> None:
        """No generation is played any more: the run is updating (or evaluating) or finished."""
        with self.lock:
            self.gen, self.state = None, state
        if state in ("finished", "stopping"):
            self.ready.set()  # start requests waiting now hear that training is over, or that the server stops
        else:
            self.ready.clear()

    def owes(self, gen: Generation, k: int) -> bool:
        """Member k has episodes without a reward (its client may be playing one)."""
        with self.lock:
            return any(gen.episode_id(k, j) not in gen.rewards for j in range(gen.episodes_per_member))

    def fail_queued(self, error: ServeError) -> None:
        """Every job still in the queue answered with `error`."""
        while True:
            try:
                job = self.jobs.get_nowait()
            except queue.Empty:
                return
            if not job.future.done():
                job.future.set_exception(error)

    # -- the HTTP threads' side ------------------------------------------------------------------
    def submit_chat(self, req: ChatRequest) -> Job:
        k = member_index(req.model)
        with self.lock:
            if self.state == "finished":
                raise ServeError(409, "training is over: nothing more is served")
            if self.state == "stopping":
                raise ServeError(503, STOPPING_LINE, "server_error")
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
            job = Job("chat", req, None if gen is None else gen.t)
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
                if self.state == "stopping":
                    raise ServeError(503, STOPPING_LINE, "server_error")
            if not ready or time.time() >= deadline:
                raise ServeError(503, "no generation is being played now (the server is updating or evaluating); "
                                      "POST /es/generation/start waits for the next one", "server_error")
            time.sleep(0.01)  # published and finished meanwhile: wait for the next

    def check_prompt(self, req: ChatRequest) -> None:
        """The prompt's tokens plus the reply's budget within the model's positions (an HTTP thread's work)."""
        if self.limits.positions is None:
            return
        self.limits.check_chars(req)  # a megabyte of text is refused before any tokenizing
        try:  # with its tools, as the model thread renders it
            text = chat_text(self.counter, req.conversation(self.tools_format))
        except Exception as err:  # a template that refuses a role or an order of messages (jinja's TemplateError)
            raise ServeError(400, f"messages: the model's chat template refuses them: {' '.join(str(err).split())}")
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
            append_reward(self.run_path, gen.file, {"episode": post.episode, "reward": post.reward,
                                                    "metadata": post.metadata})
            gen.rewards[post.episode] = post.reward
            gen.metadata[post.episode] = post.metadata
            left = len(gen.missing())
        self.jobs.put(Job("wake"))  # a finish waiting for the last rewards
        return {"episode": post.episode, "generation": gen.t, "missing": left}

    def submit_finish(self, post: FinishPost) -> concurrent.futures.Future:
        with self.lock:
            if self.gen is None:
                raise ServeError(409, "no generation is in progress to finish")
            job = Job("finish", post, self.gen.t, target=self.gen)
        self.jobs.put(job)
        return job.future

    def status(self) -> dict:
        with self.lock:
            gen = self.gen
            return {"state": self.state, "generation": None if gen is None else gen.t,
                    "generations": self.generations,
                    "missing": None if gen is None else len(gen.missing()), "requests": self.requests,
                    "chats_waiting": self.jobs.qsize() + self.load(),  # about: the queue
                    "run": None if self.run_path is None else str(self.run_path)}
