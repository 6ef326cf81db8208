"""The gate: a screened candidate skill joins the library only if it does not hurt on a minibatch
of TRAINING tasks (never validation or held-out).

The current, unperturbed weights play coevo.grow.minibatch training tasks (the same tasks and
rollout seed in every arm: differences are paired) with the current most likely context, once
without any candidate and once with each candidate added. With d_i = reward_with_i -
reward_without_i over the n tasks and SE = sd(d) / sqrt(n) (sample sd, n - 1):

    admitted  iff  mean(reward_with) >= mean(reward_without) - coevo.grow.tolerance_se * SE

The tolerance is in units of the minibatch's own noise, so it means the same for any reward
scale and minibatch size. The default 0 admits only a candidate that did no worse on the
minibatch at all; docs/method.md "Library growth" gives the error rates.
"""
from __future__ import annotations

import math

from ....utils.seeding import derive_seed


def decide(with_rewards: list[float], without_rewards: list[float], tolerance_se: float) -> dict:
    """The gate's figures and verdict for one candidate (paired per-task rewards)."""
    n = len(with_rewards)
    if n != len(without_rewards) or n == 0:
        raise ValueError(f"the gate needs paired rewards on the same tasks, got {n} and {len(without_rewards)}")
    mean_with, mean_without = sum(with_rewards) / n, sum(without_rewards) / n
    d = [a - b for a, b in zip(with_rewards, without_rewards)]
    md = sum(d) / n
    se = math.sqrt(sum((x - md) ** 2 for x in d) / (n - 1) / n) if n > 1 else 0.0
    tolerance = tolerance_se * se
    return {"n": n, "mean_with": mean_with, "mean_without": mean_without, "diff": mean_with - mean_without,
            "se": se, "tolerance": tolerance, "admitted": bool(mean_with >= mean_without - tolerance)}


def gate_tasks(tasks, n: int, t: int):
    """The gate's minibatch after generation t: training tasks under their own key, so they are not
    the very episodes the candidate was written from (with tasks.fresh_each_generation=false:
    the fixed training set, as every generation)."""
    return tasks.train(n, ("grow", t))


def play_arms(replica, t: int, contexts: list) -> list[list[float]]:
    """Per-task rewards of each context (arm) on the gate's minibatch, all arms in one rollout with
    the replica's current (unperturbed) weights; row k of every arm plays the same task."""
    cfg = replica.cfg
    n = cfg.coevo.grow.minibatch
    envs, ids, obs, per_row = [], [], [], []
    for ctx in contexts:
        e, i, o = gate_tasks(replica.tasks, n, t)
        envs += e
        ids += i
        obs += o
        per_row += [ctx] * len(e)
    episodes = replica.rollout_fn(replica.policy, envs, ids, obs, cfg, seed=derive_seed("grow-gate", cfg.run.seed, t),
                                  context=per_row)
    rewards = [float(ep.reward) for ep in episodes]
    return [rewards[k * n : (k + 1) * n] for k in range(len(contexts))]
