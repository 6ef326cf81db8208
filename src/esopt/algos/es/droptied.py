"""Episodes where they count (es.drop_tied_rounds): drop the generation's tied tasks, play fresh ones instead.

A task on which every member scored alike (each member's mean reward over its episodes of the task,
equal to within diagnostics.TIE_TOL) tells the update nothing: it adds the same amount to every
member's reward. With es.drop_tied_rounds=N (N >= 1; 0, the default, is off and leaves every run as
it was, bit for bit):

1. the members play the generation's tasks as always (es.episodes_per_member tasks, common to all);
2. the tasks of that round on which every member tied are dropped, and as many fresh tasks are drawn
   from the training stream and played by every member (a further round); repeated while a round
   left tied tasks, up to N further rounds;
3. each member's reward is the mean of its episodes' rewards over the tasks kept (every task played,
   of any round, less every tied one), so the update's rewards come from tasks with signal. When
   every task tied, the reward is the mean over all of them (every member alike: no update).

Budget: round 1 plays the usual es.population x es.episodes_per_member episodes; each further round
plays es.population x (tasks dropped in the round before) more, so a generation plays at most
(N + 1) times the usual episodes. Every episode played is counted in the generation's `episodes`
metric (studies compare at equal episodes); the update uses at most es.episodes_per_member tasks'
worth of rewards per member plus the refills that broke a tie.

Determinism: the fresh tasks are the first tasks of ``tasks.train(n, generation)`` (the same
generation-keyed stream round 1 draws from, asked for more) whose ids were not played yet this
generation, with n = tasks played so far + tasks wanted, doubled (at most 4 times) until enough new
ids turn up; fewer when the stream has no more. They depend only on the run seed, the generation and
the rewards, and later generations' tasks are untouched (each draws with its own generation key).
A further round's rollout seeds are the round-1 seeds salted with ("drop-tied", round). The history
record keeps the coefficients (what replay uses) and, under "drop_tied", the tasks dropped and the
ids drawn in each further round; the trajectories file keeps every episode, those of dropped tasks
marked "dropped": true, each with its "round" (0 = the generation's own tasks).

Where: members played in the training process (LocalRunner). Ray workers (--workers) and esopt serve
are refused at the config check: their runners play one fixed set of tasks per generation.
"""
from __future__ import annotations

import numpy as np

from ...train.runner import Played
from .diagnostics import TIE_TOL, finite_reward, member_task_rewards

ROUND_KEY, DROPPED_KEY = "round", "dropped"
MAX_DOUBLINGS = 4


def tied_task_ids(traj: list[dict]) -> list[str]:
    """Tasks (in first-played order) on which every member that played them scored alike: at least two
    members, every episode of the task with a finite reward, the members' means equal to within TIE_TOL."""
    unfinite = {str(ep.get("task")) for ep in traj if finite_reward(ep) is None}
    out = []
    for task, by in member_task_rewards(traj).items():
        vals = list(by.values())
        if task not in unfinite and len(vals) >= 2 and max(vals) - min(vals) <= TIE_TOL:
            out.append(task)
    return out


def replacement_draw(tasks, generation: int, played: set[str], k: int) -> tuple[int, list[int], list[str]]:
    """(n, positions, ids): the fresh tasks are ``tasks.train(n, generation)``'s entries at `positions`
    (their ids: `ids`), the first k whose ids were not in `played` (nor picked already); fewer (or none)
    when the stream has no more distinct tasks within MAX_DOUBLINGS doublings of n."""
    n = len(played) + k
    for _ in range(MAX_DOUBLINGS + 1):
        _, ids, _ = tasks.train(n, generation)
        positions, picked = [], []
        for pos, task in enumerate(ids):
            if str(task) not in played and str(task) not in picked:
                picked.append(str(task))
                positions.append(pos)
                if len(positions) == k:
                    return n, positions, picked
        n *= 2
    return n // 2, positions, picked


def _draw(tasks, n: int, generation: int, positions: list[int]):
    """What each member plays in a further round: fresh envs of the chosen tasks (envs are stateful)."""
    def draw():
        envs, ids, obs = tasks.train(n, generation)
        return [envs[p] for p in positions], [ids[p] for p in positions], [obs[p] for p in positions]
    return draw


def kept_rewards(members, traj: list[dict], errors: dict, dropped: set[str]) -> list[float]:
    """Each member's reward (in member order): the mean of its episodes' rewards over the kept tasks
    (all of them when every task was dropped); NaN for a member whose rollout failed in any round."""
    out = []
    for m in members:
        if str(m.index) in errors:
            out.append(float("nan"))
            continue
        mine = [ep for ep in traj if ep["member"] == m.index]
        kept = [ep["reward"] for ep in mine if str(ep.get("task")) not in dropped] or [ep["reward"] for ep in mine]
        out.append(float(np.mean(kept)) if kept else float("nan"))
    return out


def play_dropping_tied(trainer, members, sigma: float, t: int, times: dict, bar=None, contexts=None):
    """(Played with the kept tasks' rewards and every round's episodes, {"metrics": ..., "record": ...})."""
    runner, rounds = trainer.runner, trainer.cfg.es.drop_tied_rounds
    first = runner.play(members, sigma, t, times, bar, contexts=contexts)
    traj = [dict(ep, **{ROUND_KEY: 0}) for ep in first.traj]
    errors, tokens = dict(first.errors), first.tokens
    played = {str(ep.get("task")) for ep in traj}
    last, drawn = traj, []
    for r in range(1, rounds + 1):
        tied = tied_task_ids(last)
        if not tied:
            break
        n, positions, ids = replacement_draw(trainer.tasks, t, played, len(tied))
        if not positions:
            break  # the stream has no task this generation has not played
        draw = _draw(trainer.tasks, n, t, positions)
        round_times: dict = {}
        got = runner.play(members, sigma, t, round_times, None, contexts=contexts, tasks=draw, salt=("drop-tied", r))
        for key, value in round_times.items():
            times[key] = times.get(key, 0.0) + value
        last = [dict(ep, **{ROUND_KEY: r}) for ep in got.traj]
        traj += last
        tokens += got.tokens
        for key, error in got.errors.items():
            errors.setdefault(key, error)
        drawn.append(ids)
        played |= set(ids)
    dropped = tied_task_ids(traj)
    gone = set(dropped)
    for ep in traj:
        if str(ep.get("task")) in gone:
            ep[DROPPED_KEY] = True
    rewards = kept_rewards(members, traj, errors, gone)
    kept = len(played) - len(gone)
    metrics = {"tasks_played": len(played), "tasks_dropped": len(gone), "drop_tied_rounds_played": len(drawn)}
    if played:
        metrics["diag_kept_task_share"] = kept / len(played)
    record = {"dropped": dropped, "drawn": drawn}
    return Played(rewards, traj, errors, tokens, first.extra), {"metrics": metrics, "record": record}
