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

import time
import traceback

import numpy as np
import torch

from ..utils.seeding import derive_seed
from .loop import turn_progress


def batched(perturber) -> bool:
    """Whether members share one rollout: the perturber plays them as rows of one batch (low-rank
    side terms, nothing perturbed in place)."""
    return perturber.play_mode == "rows"


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


def play_unit(replica, unit: list, sigma: float, t: int, population: int, times: dict, bar=None, contexts=None):
    """(rewards, trajectory records, {member index: traceback}) of one unit; weights restored.
    contexts: one AgentContext per member of the unit (coevo), or None for the agent's own."""
    if batched(replica.perturber):
        seed = unit_rollout_seed(replica.cfg.run.seed, t, unit, population)
        rewards, traj, err = play_rows(replica, unit, sigma, t, times, bar, seed, contexts)
        return rewards, traj, ({str(m.index): err["all"] for m in unit} if err else {})
    if replica.perturber.play_mode == "rows+others":
        return play_lowrank_others(replica, unit, sigma, t, times, bar, contexts)
    return play_sequential(replica, unit, sigma, t, times, bar, contexts)


def play_contexts(replica, members: list, t: int, times: dict, bar=None, contexts=None):
    """coevo.mode=context: the weights stay as they are. Members that drew the same context decode
    together, one batch per distinct context, so each batch's rows share their whole prompt prefix
    (one batch of every member's rows shared only what all contexts have in common: 2.1x the prompt
    tokens encoded and 2.0x the time of weights-only ES, `esopt bench throughput --context`)."""
    seed = derive_seed("rollout", replica.cfg.run.seed, t)
    groups: dict[str, list[int]] = {}
    for k, context in enumerate(contexts if contexts is not None else [None] * len(members)):
        groups.setdefault(repr(context), []).append(k)
    rewards, by_member, errors = [float("nan")] * len(members), {}, {}
    for ks in groups.values():
        got, traj, err = play_rows(replica, [members[k] for k in ks], 0.0, t, times, bar, seed,
                                   None if contexts is None else [contexts[k] for k in ks], side_terms=False)
        for k, reward in zip(ks, got):
            rewards[k] = reward
            by_member[members[k].index] = [ep for ep in traj if ep["member"] == members[k].index]
            if err:
                errors[str(members[k].index)] = err["all"]
    return rewards, [ep for m in members for ep in by_member.get(m.index, [])], errors


def play_member(replica, m, sigma: float, t: int, times: dict, progress=None, context=None):
    """(reward, episodes, error traceback) of one member; the weights are restored whatever happens.
    context: the member's AgentContext (coevo), None for the agent's own."""
    cfg = replica.cfg
    envs, ids, obs = replica.tasks.train(cfg.es.episodes_per_member, t)
    extra = {} if context is None else {"context": context}
    t0 = time.time()
    marks = []
    try:
        with replica.perturber.perturbed(m.seed, sigma, m.sign):
            marks.append(time.time())
            episodes = replica.rollout_fn(replica.policy, envs, ids, obs, cfg,
                                          seed=derive_seed("rollout", cfg.run.seed, t, m.index), on_turn=progress,
                                          **extra)
            marks.append(time.time())
    except Exception:  # the member counts as the worst (NaN reward); the weights were restored
        error = traceback.format_exc()
        replica.log(f"[esopt] member {m.index} of generation {t} failed:\n{error}")
        return float("nan"), [], error
    finally:
        end = time.time()
        marks += [end] * (2 - len(marks))
        times["perturb"] += marks[0] - t0
        times["rollout"] += marks[1] - marks[0]
        times["restore"] += end - marks[1]
    return float(np.mean([ep.reward for ep in episodes])), episodes, None


def play_sequential(replica, members, sigma: float, t: int, times: dict, bar=None, contexts=None):
    """Full-rank noise: members one after another, each with perturbed weights."""
    rewards, traj, errors = [], [], {}
    for k, m in enumerate(members):
        progress = None
        if bar is not None:
            so_far = f"{np.nanmean(rewards):.3f}" if rewards else "-"

            def progress(turn, done, played=0, m=m, so_far=so_far):
                bar.set_postfix_str(f"gen {t} member {m.index} episodes {done}/{replica.cfg.es.episodes_per_member} "
                                    f"reward {so_far}", refresh=False)
        reward, episodes, error = play_member(replica, m, sigma, t, times, progress,
                                              None if contexts is None else contexts[k])
        rewards.append(reward)
        traj += [{"generation": t, "member": m.index, **ep.to_json()} for ep in episodes]
        if error:
            errors[str(m.index)] = error
        if bar is not None:
            bar.update(1)
    return rewards, traj, errors


def play_lowrank_others(replica, members, sigma: float, t: int, times: dict, bar=None, contexts=None):
    """Low-rank noise with es.lowrank_others=full: each member's other tensors are perturbed in
    place, so the members decode one after another (each batch holds one member's rows)."""
    rewards, traj, errors = [], [], {}
    for k, m in enumerate(members):
        t0 = time.time()
        with replica.perturber.others_perturbed(m.seed, sigma, m.sign):
            t1 = time.time()
            r, tr, err = play_rows(replica, [m], sigma, t, times, bar,  # records a failed rollout, never raises
                                   derive_seed("rollout", replica.cfg.run.seed, t, m.index),
                                   None if contexts is None else [contexts[k]])
            t2 = time.time()
        times["perturb"] += t1 - t0
        times["restore"] += time.time() - t2
        rewards += r
        traj += tr
        if err:
            errors[str(m.index)] = err["all"]
    return rewards, traj, errors


def play_rows(replica, members, sigma: float, t: int, times: dict, bar, rollout_seed: int, contexts=None,
              side_terms: bool = True):
    """These members' episodes in one rollout, row j under its member's side terms (unless not
    side_terms) and with its member's context (contexts: one per member; None: the agent's own)."""
    cfg = replica.cfg
    envs, ids, obs, row_member = [], [], [], []
    for k, _ in enumerate(members):
        e, i, o = replica.tasks.train(cfg.es.episodes_per_member, t)
        envs += e
        ids += i
        obs += o
        row_member += [k] * len(e)
    rows = torch.tensor(row_member)
    seeds, scales = [m.seed for m in members], [m.sign * sigma for m in members]

    def row_context(idx):
        return replica.perturber.side_terms(seeds, scales, rows[idx])

    extra = {"row_context": row_context, "row_groups": row_member} if side_terms else {}
    if contexts is not None:
        extra["context"] = [contexts[k] for k in row_member]
    progress = turn_progress(bar, f"gen {t}", len(envs))
    t0 = time.time()
    try:
        episodes = replica.rollout_fn(replica.policy, envs, ids, obs, cfg, seed=rollout_seed, on_turn=progress,
                                      **extra)
    except Exception:
        error = traceback.format_exc()
        replica.log(f"[esopt] generation {t} rollout of members {[m.index for m in members]} failed:\n{error}")
        return [float("nan")] * len(members), [], {"all": error}
    finally:
        times["rollout"] += time.time() - t0
        if bar is not None:
            bar.update(len(members))
    rewards = [float(np.mean([ep.reward for ep, r in zip(episodes, row_member) if r == k])) for k in range(len(members))]
    traj = [{"generation": t, "member": members[r].index, **ep.to_json()} for ep, r in zip(episodes, row_member)]
    return rewards, traj, {}

