"""Playing a generation's members on one model replica: the code both schedulers run.

A replica is anything holding ``cfg``, ``policy``, ``perturber``, ``tasks``, ``rollout_fn`` and
``log``: the Trainer itself (members played in the training process, train/runner.py) or a
Ray worker's copy of the model (train/ray/replica.py). Which replica plays a unit of members does
not change its result: weights, tasks (per generation) and rollout seeds (per member, or per
unit of low-rank members) are the same on every replica.

Units: full-rank noise (and low-rank with es.lowrank_others=full) plays one member per unit;
low-rank noise plays es.members_per_rollout members per unit in one batched rollout, one
member per batch row.
"""
from __future__ import annotations

import contextlib
import time
import traceback

import numpy as np

from ..utils.seeding import derive_seed
from .loop import turn_progress
from .member_weights import batched, member_weights


def work_units(members: list, cfg, perturber, batch: int | None = None) -> list[list]:
    """The generation's members cut into units of work, in member order: one member per unit,
    or, in batched low-rank mode, `batch` members per unit (es.members_per_rollout; 0 or None:
    the whole population in one unit)."""
    if not batched(perturber):
        return [[m] for m in members]
    size = batch or cfg.es.members_per_rollout or len(members)
    return [members[i : i + size] for i in range(0, len(members), size)]


def unit_rollout_seed(run_seed: int, t: int, unit: list, population: int) -> int:
    """The rollout seed of a batched low-rank unit: the generation's (as before units existed)
    when the unit is the whole population, else one of its own from its first member."""
    if len(unit) == population:
        return derive_seed("rollout", run_seed, t)
    return derive_seed("rollout", run_seed, t, "unit", unit[0].index)


def new_times() -> dict:
    return {"perturb": 0.0, "rollout": 0.0, "restore": 0.0}


def play_unit(replica, unit: list, sigma: float, t: int, population: int, times: dict, bar=None, contexts=None,
              tasks=None, salt: tuple = ()):
    """(rewards, trajectory records, {member index: traceback}) of one unit; weights restored.
    contexts: one AgentContext per member of the unit (coevo), or None for the agent's own.
    tasks: what each member plays, a callable giving (envs, task ids, observations); None: the
    generation's training tasks. salt: appended to the rollout seeds (a further round of the same
    generation, es.drop_tied_rounds: algos/es/droptied.py); () keeps them as they always were.
    Batched low-rank members play one rollout together (one member per row); in the other play modes
    the members play one after another, each under its own weights (train/member_weights.py)."""
    if batched(replica.perturber):
        seed = _salted(unit_rollout_seed(replica.cfg.run.seed, t, unit, population), salt)
        progress = turn_progress(bar, f"gen {t + 1}", _episodes(replica, unit))  # numbered from 1, as the log lines
        return play_batch(replica, unit, sigma, t, times, seed, progress, contexts, bar, tasks=tasks)
    rewards, traj, errors = [], [], {}
    for k, m in enumerate(unit):
        progress = _member_progress(replica, bar, m, t, rewards) if replica.perturber.play_mode == "in_place" else \
            turn_progress(bar, f"gen {t + 1}", _episodes(replica, [m]))
        seed = _salted(derive_seed("rollout", replica.cfg.run.seed, t, m.index), salt)
        r, tr, err = play_batch(replica, [m], sigma, t, times, seed, progress,
                                None if contexts is None else [contexts[k]], bar, tasks=tasks)
        rewards += r
        traj += tr
        errors.update(err)
    return rewards, traj, errors


def _salted(seed: int, salt: tuple) -> int:
    """A rollout seed of its own for a further round of a generation (salt), or the seed as it is (no salt)."""
    return derive_seed("rollout", seed, *salt) if salt else seed


def _episodes(replica, members: list) -> int:
    return replica.cfg.es.episodes_per_member * len(members)


def _member_progress(replica, bar, m, t: int, rewards: list):
    """Full-rank members one after another: the bar shows the member, its episodes done, and the mean reward so far."""
    if bar is None:
        return None
    so_far = f"{np.nanmean(rewards):.3f}" if rewards else "-"

    def progress(turn, done, played=0):
        bar.set_postfix_str(f"gen {t + 1} member {m.index} episodes {done}/{replica.cfg.es.episodes_per_member} "
                            f"reward {so_far}", refresh=False)

    return progress


def play_contexts(replica, members: list, t: int, times: dict, bar=None, contexts=None, tasks=None, salt: tuple = ()):
    """coevo.mode=context: the weights stay as they are. Members that drew the same context decode
    together, one batch per distinct context, so each batch's rows share their whole prompt prefix
    (one batch of every member's rows shared only what all contexts have in common: 2.1x the prompt
    tokens encoded and 2.0x the time of weights-only ES, `esopt bench throughput --context`)."""
    seed = _salted(derive_seed("rollout", replica.cfg.run.seed, t), salt)
    groups: dict[str, list[int]] = {}
    for k, context in enumerate(contexts if contexts is not None else [None] * len(members)):
        groups.setdefault(repr(context), []).append(k)
    rewards, by_member, errors = [float("nan")] * len(members), {}, {}
    for ks in groups.values():
        got, traj, err = play_batch(replica, [members[k] for k in ks], None, t, times, seed,
                                    turn_progress(bar, f"gen {t + 1}", _episodes(replica, ks)),
                                    None if contexts is None else [contexts[k] for k in ks], bar, tasks=tasks)
        for k, reward in zip(ks, got):
            rewards[k] = reward
            by_member[members[k].index] = [ep for ep in traj if ep["member"] == members[k].index]
            errors.update(err)
    return rewards, [ep for m in members for ep in by_member.get(m.index, [])], errors


def play_batch(replica, members: list, sigma: float | None, t: int, times: dict, rollout_seed: int, progress=None,
               contexts=None, bar=None, tasks=None):
    """These members' episodes in one rollout, under their weights (member_weights: in place and/or as side terms
    of their rows; sigma None: the weights as they are, coevo.mode=context) and each with its member's context
    (contexts: one per member; None: the agent's own). (rewards, trajectory records, {member index: traceback}); a failed
    rollout gives every member a NaN reward; the weights are restored whatever happens."""
    cfg = replica.cfg
    envs, ids, obs, row_member = [], [], [], []
    for k, _ in enumerate(members):
        e, i, o = replica.tasks.train(cfg.es.episodes_per_member, t) if tasks is None else tasks()
        envs += e
        ids += i
        obs += o
        row_member += [k] * len(e)
    extra = {}
    if contexts is not None:
        extra["context"] = contexts[0] if len(members) == 1 else [contexts[k] for k in row_member]
    t0 = time.time()
    marks = []
    try:
        weights = None if sigma is None else member_weights(replica.perturber, members, sigma, row_member)
        with weights.in_place if weights is not None else contextlib.nullcontext():
            marks.append(time.time())
            if weights is not None and weights.rows is not None:
                extra["rows"] = weights.rows
            episodes = replica.rollout_fn(replica.policy, envs, ids, obs, cfg, seed=rollout_seed, on_turn=progress,
                                          **extra)
            marks.append(time.time())
    except Exception:  # the members count as the worst (NaN reward); the weights were restored
        error = traceback.format_exc()
        who = f"member {members[0].index}" if len(members) == 1 else \
            f"the rollout of members {[m.index for m in members]}"
        replica.log(f"[esopt] {who} of generation {t} failed:\n{error}")
        return [float("nan")] * len(members), [], {str(m.index): error for m in members}
    finally:
        end = time.time()
        marks += [end] * (2 - len(marks))
        times["perturb"] += marks[0] - t0
        times["rollout"] += marks[1] - marks[0]
        times["restore"] += end - marks[1]
        if bar is not None:
            bar.update(len(members))
    rewards = [float(np.mean([ep.reward for ep, r in zip(episodes, row_member) if r == k])) for k in range(len(members))]
    traj = [{"generation": t, "member": members[r].index, **ep.to_json()} for ep, r in zip(episodes, row_member)]
    return rewards, traj, {}
