"""Where a generation's members are played: the seam between the trainer and its schedulers.

The trainer asks a MemberRunner to play the members, to apply the update (returning the
driver's weights hash, after any replicas were checked against it) and to play evaluations.
LocalRunner plays everything in the training process, on the trainer's own model: the
one-worker case. train/ray/runner.py's RayRunner plays the same units on Ray workers.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from ..es.perturb import weights_hash
from .members import batched, new_times, play_contexts, play_unit, work_units


@dataclass
class Played:
    """A generation's members as played: rewards in member order (NaN: failed), trajectory
    records, {member index: traceback} of failed members, tokens generated, and extra
    per-generation figures for the metrics line."""

    rewards: list[float]
    traj: list[dict]
    errors: dict[str, str]
    tokens: int
    extra: dict = field(default_factory=dict)


class MemberRunner(Protocol):
    driver_device: str | None  # where the trainer keeps its own weights (None: runtime.device)
    driver_threads: int | None  # torch threads of the training process (None: runtime.threads)

    def start(self, trainer) -> None: ...

    def play(self, members: list, sigma: float, t: int, times: dict, bar=None, contexts=None) -> Played: ...
    # LocalRunner's play also takes tasks= and salt= (a further round of tasks, es.drop_tied_rounds); others refuse it

    def update(self, t: int, seeds: list[int], coefs, alpha: float, population: int, times: dict) -> str: ...

    def evaluate(self, split: str, seed: int) -> tuple[dict, list[dict]]: ...

    def close(self) -> None: ...


class LocalRunner:
    """Members one unit after another on the trainer's own model (today's path)."""

    driver_device = None
    driver_threads = None

    def __init__(self):
        self.trainer = None

    def start(self, trainer) -> None:
        self.trainer = trainer

    def play(self, members, sigma, t, times, bar=None, contexts=None, tasks=None, salt: tuple = ()) -> Played:
        """contexts: one AgentContext per member (coevo), or None for the agent's own. tasks, salt: a further
        round of the generation on other tasks (members.play_unit; es.drop_tied_rounds, algos/es/droptied.py)."""
        tr = self.trainer
        tokens0 = tr.policy.tokens_generated
        rewards, traj, errors = [], [], {}
        unit_times = new_times()
        if not getattr(tr, "moves_weights", True):  # coevo.mode=context: one batched rollout per distinct context, no noise
            rewards, traj, errors = play_contexts(tr, members, t, unit_times, bar, contexts, tasks, salt)
            units = []
        else:  # one member after another needs no cutting (and keeps the progress bar's running mean)
            units = work_units(members, tr.cfg, tr.perturber) if batched(tr.perturber) else [members]
        by_index = None if contexts is None else {m.index: c for m, c in zip(members, contexts)}
        for unit in units:
            ctx = None if by_index is None else [by_index[m.index] for m in unit]
            r, tj, err = play_unit(tr, unit, sigma, t, len(members), unit_times, bar, ctx, tasks, salt)
            rewards += r
            traj += tj
            errors.update(err)
        times.update(unit_times)
        return Played(rewards, traj, errors, tr.policy.tokens_generated - tokens0)

    def update(self, t, seeds, coefs, alpha, population, times) -> str:
        tr = self.trainer
        t0 = time.time()
        tr.perturber.apply_update(seeds, coefs, alpha, population)
        times["update"] = time.time() - t0
        t0 = time.time()
        digest = weights_hash(tr.model)
        times["hash"] = time.time() - t0
        return digest

    def evaluate(self, split, seed):
        from . import stop
        from .evaluate import evaluate

        tr = self.trainer
        return evaluate(tr.policy, tr.tasks, tr.cfg, seed=seed, split=split, abort=stop.requested)

    def close(self) -> None:
        pass
