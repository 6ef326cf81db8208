"""Signal diagnostics of one ES generation: why a generation had (or lacked) a learning signal.

Pure functions over what the trainer already holds after the members were played: the episode
records (traj: dicts with "member", "task", "reward" and "turns", each turn with its "response")
and the members (index, seed, sign). They only read; nothing here enters the update, so replay
and resume are unchanged. The trainer logs their figures as `diag_*` keys of the generation's
metrics line (docs/method.md, "Signal diagnostics"):

- diag_tasks, diag_tied_tasks, diag_tied_task_share: tasks played this generation by at least
  two members, and those where every member scored alike (each member's mean reward over its
  episodes of that task; equal to within 1e-9). A share of 1 means the generation saw no
  difference between members on any task: the update is 0 (the `no_update` flag).
- diag_identical_pair_share: with antithetic sampling (members sharing a seed with opposite
  signs), the share of pairs whose replies were identical on every task both played: the full
  reply sequence (every turn's response, episode by episode). Such a pair's +/- perturbation
  changed nothing the env could see. Absent without antithetic sampling (no pairs).
- diag_distinct_replies: the mean over tasks of the number of distinct FIRST-turn replies across
  the members' episodes of that task. The first turn's prompt is the same for every member, so a
  difference is due to the perturbation (or sampling) alone; later turns also differ because the
  env's feedback did. 1.0 means every member answered the first turn alike.
- diag_kept_task_share (with es.drop_tied_rounds, computed by droptied.py): the share of the tasks
  played this generation (every round) that the update's rewards came from, the rest having tied;
  beside it tasks_played, tasks_dropped and drop_tied_rounds_played.
- diag_reward_spread: the mean over tasks of the standard deviation (ddof 0) of the members'
  per-task mean rewards: how much a task separated the members.

Episodes without a finite reward (a failed episode's reward is recorded as such) count as played
but are left out of the reward figures.
"""
from __future__ import annotations

import math
from collections import defaultdict

TIE_TOL = 1e-9


def finite_reward(ep: dict) -> float | None:
    """The episode's reward if it is a finite number, else None (a failed episode's)."""
    r = ep.get("reward")
    return float(r) if isinstance(r, (int, float)) and math.isfinite(r) else None


def _replies(ep: dict) -> tuple[str, ...]:
    return tuple(str(t.get("response", "")) for t in ep.get("turns") or [])


def member_task_rewards(traj: list[dict]) -> dict[str, dict[int, float]]:
    """task -> member -> the member's mean finite reward on that task (in first-played order)."""
    sums: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for ep in traj:
        r = finite_reward(ep)
        if r is not None:
            sums[str(ep.get("task"))][int(ep["member"])].append(r)
    return {task: {m: sum(v) / len(v) for m, v in by.items()} for task, by in sums.items()}


def tied_tasks(traj: list[dict]) -> tuple[int, int]:
    """(tasks where every member scored alike, tasks played by at least two members with a finite reward)."""
    by_task = member_task_rewards(traj)
    compared = [list(by.values()) for by in by_task.values() if len(by) >= 2]
    tied = sum(1 for vals in compared if max(vals) - min(vals) <= TIE_TOL)
    return tied, len(compared)


def reward_spread(traj: list[dict]) -> float | None:
    """Mean over tasks (played by at least two members) of the std of the members' per-task mean rewards."""
    spreads = []
    for by in member_task_rewards(traj).values():
        vals = list(by.values())
        if len(vals) >= 2:
            mean = sum(vals) / len(vals)
            spreads.append(math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals)))
    return sum(spreads) / len(spreads) if spreads else None


def distinct_replies(traj: list[dict]) -> float | None:
    """Mean over tasks of the number of distinct first-turn replies across all members' episodes of it."""
    firsts: dict[str, set[str]] = defaultdict(set)
    for ep in traj:
        replies = _replies(ep)
        if replies:
            firsts[str(ep.get("task"))].add(replies[0])
    return sum(len(s) for s in firsts.values()) / len(firsts) if firsts else None


def antithetic_pairs(members) -> list[tuple[int, int]]:
    """(index of the + member, index of the - member) of each seed played by exactly two members of
    opposite signs; [] without antithetic sampling (or a context-only search, whose members carry no noise)."""
    by_seed: dict[int, list] = defaultdict(list)
    for m in members:
        by_seed[int(m.seed)].append(m)
    pairs = []
    for group in by_seed.values():
        if len(group) == 2 and {group[0].sign, group[1].sign} == {1, -1}:
            plus, minus = sorted(group, key=lambda m: -m.sign)
            pairs.append((int(plus.index), int(minus.index)))
    return pairs


def identical_pairs(traj: list[dict], members) -> tuple[int, int]:
    """(pairs whose replies were identical on every task both played, pairs that shared a task)."""
    played: dict[int, dict[str, list[tuple[str, ...]]]] = defaultdict(lambda: defaultdict(list))
    for ep in traj:
        played[int(ep["member"])][str(ep.get("task"))].append(_replies(ep))
    same = compared = 0
    for a, b in antithetic_pairs(members):
        common = set(played[a]) & set(played[b])
        if not common:
            continue
        compared += 1
        same += all(played[a][task] == played[b][task] for task in common)
    return same, compared


def signal_diagnostics(traj: list[dict], members) -> dict:
    """The generation's diag_* figures (the module docstring defines each); keys without data are left out."""
    out: dict = {}
    tied, tasks = tied_tasks(traj)
    out["diag_tasks"], out["diag_tied_tasks"] = tasks, tied
    if tasks:
        out["diag_tied_task_share"] = tied / tasks
    same, pairs = identical_pairs(traj, members)
    if pairs:
        out["diag_pairs"], out["diag_identical_pairs"] = pairs, same
        out["diag_identical_pair_share"] = same / pairs
    distinct = distinct_replies(traj)
    if distinct is not None:
        out["diag_distinct_replies"] = distinct
    spread = reward_spread(traj)
    if spread is not None:
        out["diag_reward_spread"] = spread
    return out


def describe(stats: dict) -> str:
    """A short console note when the generation's signal was weak: ties on some tasks, identical pairs."""
    parts = []
    if stats.get("diag_tied_tasks"):
        parts.append(f"ties {stats['diag_tied_tasks']}/{stats['diag_tasks']} tasks")
    if stats.get("diag_identical_pairs"):
        parts.append(f"{stats['diag_identical_pairs']}/{stats['diag_pairs']} pairs replied alike")
    if "diag_kept_task_share" in stats:  # es.drop_tied_rounds (droptied.py)
        kept = stats["tasks_played"] - stats["tasks_dropped"]
        parts.append(f"kept {kept}/{stats['tasks_played']} tasks ({stats['diag_kept_task_share']:.0%})")
    return " | " + ", ".join(parts) if parts else ""
