"""One model replica: what a Ray worker holds, and the calls the driver makes on it.

A replica loads the run's base model, checks it is the run's base (weights hash), and replays
the history it is given (hash-verified), so a replica started at generation t, first or as a
replacement for one that died, holds the driver's weights at t. It then plays units of members
with the same code as the training process (train/members.py), applies each generation's update
from seeds and returns its weights hash for the driver to compare.

Plain Python: train/ray/runner.py makes it a Ray actor; tests also use it in-process.
"""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import torch

from ...es.history import History
from ...es.perturb import weights_hash
from ...models import load_model
from ..evaluate import run_episodes
from ..members import new_times, play_unit
from ..replica import ModelReplica
from ...utils.memory import peak_rss_mb
from ...utils.threads import set_threads
from .errors import ReplicaError

REPLAY_KEYS = ("generation", "seeds", "coefficients", "alpha", "population", "weights_hash")


def replay_records(records: list[dict]) -> list[dict]:
    """What a replica needs of the history to replay it (not rewards, errors, ...)."""
    return [{k: r[k] for k in REPLAY_KEYS} for r in records]


def worker_device(device: str) -> str:
    """A worker's device: Ray shows each GPU worker only its own GPU, as cuda:0."""
    return "cuda" if device.startswith("cuda") else device


def log_line(line: str) -> None:
    print(line, flush=True)  # Ray shows a worker's output in the driver's, prefixed with its pid


class Replica(ModelReplica):
    def __init__(self, cfg, index: int, threads: int, base_hash: str, records: list[dict], rollout_fn=None,
                 env: dict | None = None):
        """cfg: the run's Config, or its model_dump (what the Ray driver sends); records: the history so
        far (replay_records); rollout_fn: a replacement for run_episodes (tests); env: environment
        variables to set first (ESOPT_CACHE, ESOPT_ENV_PATH)."""
        os.environ.update(env or {})
        set_threads(threads)  # torch's, and numba's pool for the kernels (before numba loads)
        if isinstance(cfg, dict):  # from the driver as plain data: the env (a user's module too) is imported here
            from ...config import build_config

            cfg = build_config(cfg)
        self.index = index
        t0 = time.time()
        model, tokenizer = load_model(cfg.model, cfg.runtime.dtype, worker_device(cfg.runtime.device))
        super().__init__(cfg, model, tokenizer, log_line, rollout_fn)  # policy, perturber, tasks
        self.load_s = time.time() - t0
        t0 = time.time()
        history = History(Path(f"replica-{index}.json"), list(records), {"base_weights_hash": base_hash})
        try:
            self.generations = history.replay(self.perturber)  # never saved: the path is a name only
        except RuntimeError as err:
            raise ReplicaError(f"replica {index} on {socket.gethostname()}: {err}") from None
        self.replay_s = time.time() - t0

    def info(self) -> dict:
        """Where this replica runs and how it started (the driver logs it once it is ready)."""
        return {"index": self.index, "host": socket.gethostname(), "pid": os.getpid(),
                "threads": torch.get_num_threads(), "device": str(self.policy.device), "generations": self.generations,
                "load_s": self.load_s, "replay_s": self.replay_s, "peak_rss_mb": peak_rss_mb()}

    def play(self, unit: list, sigma: float, t: int, population: int) -> dict:
        """One unit of generation t's members (a member's context, with co-evolution, rides on it)."""
        times = new_times()
        tokens0 = self.policy.tokens_generated
        rewards, traj, errors = play_unit(self, unit, sigma, t, population, times)
        return {"rewards": rewards, "traj": traj, "errors": errors, "times": times,
                "tokens": self.policy.tokens_generated - tokens0, "replica": self.index}

    def update(self, t: int, seeds: list[int], coefs: list[float], alpha: float, population: int) -> str:
        """Generation t's update from seeds; returns the weights hash the driver compares with its own."""
        if t != self.generations:
            raise ReplicaError(f"replica {self.index} holds the weights after {self.generations} generations; "
                               f"it cannot apply generation {t}'s update")
        self.perturber.apply_update(seeds, coefs, alpha, population)
        self.generations = t + 1
        return weights_hash(self.model)

    def evaluate(self, split: str, seed: int, lo: int, hi: int) -> list[dict]:
        """Episodes lo..hi-1 of a split with the unperturbed weights; the slice's decoding seed
        is offset by lo, as a batch starting there gets in a local evaluation."""
        envs, ids, obs = getattr(self.tasks, split)()
        return [ep.to_json() for ep in run_episodes(self.policy, envs[lo:hi], ids[lo:hi], obs[lo:hi], self.cfg, seed + lo)]

    def weights_hash(self) -> str:
        return weights_hash(self.model)
