"""esopt probe CONFIG: before any training, how far a perturbation of scale sigma moves the agent, and
a sigma (and a population / episodes split) recommended from it.

What it plays. M tasks (--tasks) of the config's validation split, or of the training split's first
generation when the config has none (tasks.validation=0; the output says which); never the held-out
split (hyperparameters are chosen on validation; held-out is for final figures). They are played once
with the unperturbed weights (the base) and once by each of N members (--members; +/- pairs when
es.antithetic) at each sigma (--sigmas), all with the agent's own decoding and one rollout seed, so
sigma 0 gives the base's episodes bit for bit and every difference is the perturbation's. The members
are the same N directions at every sigma (drawn as an ES generation draws them, es.strategy, from the
run seed), scaled as the config scales them (es.noise, es.scope, es.sigma_scale). Cost: tasks x (1 +
sigmas x members) episodes, e.g. 16 x (1 + 3 x 8) = 400 with the defaults.

What it measures, per sigma, over the (member, task) episodes:
- replies changed: the episode's replies (every turn's, in order) differ from the base's on that task;
- format changed / broken: the episode's format (format_ok: no error and, when the env reports the
  action it read from a reply (info["action"]: Sudoku's move, reasoning-gym's answer, a browser call),
  every turn's reply was read) differs from the base's / was ok in the base and is not in the member;
  an env that reports no action is judged by errors alone (the output says so);
- reward changed: the episode's reward differs from the base's;
- tasks tied: the tasks on which every member scored the same reward. ES learns nothing from a task
  whose members tie (their shaped rewards do not depend on it); the rest is the "signal share";
- spread: per task, the largest minus the smallest member reward, averaged over tasks.

The recommendation (recommend()) is a heuristic, and says so: the smallest sigma whose members' rewards
differ on at least SIGNAL_SHARE of the tasks while the format breaks on at most FORMAT_BREAK_MAX of the
episodes. Smaller is preferred because an ES step estimates the gradient at theta from a finite
difference of size sigma: the smallest sigma that the rewards can see keeps that estimate closest to
the local slope. Half the tasks is where most generations get a usable ranking from a few tasks per
member; one episode in ten with a broken format is where members are mostly ranked by whether they
still answer at all, which teaches the format back rather than the task. Then two hints from the chosen
sigma's figures (each assumes tasks and members independent, which they are not quite):
- episodes per member: a generation's members all tie when each of its E tasks ties; with a tie share
  t per task that happens with chance t^E, so E >= log(NO_SIGNAL_CHANCE) / log(t);
- population: with a share p of member episodes whose reward moves off the base's, N members give
  N x p such members per task; N >= MIN_MOVED / p (even, with antithetic pairs).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

from .method.room import replies  # an episode's replies, as bench room counts them

SIGMAS = "1e-3,3e-3,1e-2"
MEMBERS, TASKS = 8, 16
SIGNAL_SHARE = 0.5  # the chosen sigma's members' rewards differ on at least this share of the tasks ...
FORMAT_BREAK_MAX = 0.1  # ... while at most this share of its episodes lose the format the base had
NO_SIGNAL_CHANCE = 0.05  # episodes-per-member hint: the chance a generation's members all tie
MIN_MOVED = 2  # population hint: members per task whose reward moves off the base's


def add_arguments(p) -> None:
    p.add_argument("args", nargs="*", metavar="CONFIG_OR_OVERRIDE")
    p.add_argument("--sigmas", default=SIGMAS, metavar="S1,S2,...",
                   help=f"the noise scales to try, comma-separated, each >= 0 (default {SIGMAS}); scaled per tensor "
                        "as es.sigma_scale says")
    p.add_argument("--members", type=int, default=MEMBERS, metavar="N",
                   help=f"perturbed members per sigma (default {MEMBERS}; even with es.antithetic: +/- pairs)")
    p.add_argument("--tasks", type=int, default=TASKS, metavar="M",
                   help=f"tasks played (default {TASKS}): the validation split's first M, or the training split's "
                        "when tasks.validation=0; never held-out")
    p.add_argument("--out", metavar="FILE.json", help="also write the figures, per sigma and per task, as JSON")
    p.set_defaults(refuse=lambda a, stray: f"esopt: error: probe does not take {' '.join(stray)} (its flags: "
                                           "--sigmas, --members, --tasks, --out; see esopt probe --help)")


# -- measurement on episode records (Episode.to_json() dicts) ------------------------------------------


def reports_actions(episodes) -> bool:
    """Whether the env says which action it read from a reply (some turn's "action" is not None)."""
    return any(t.get("action") is not None for ep in episodes for t in ep.get("turns") or ())


def turn_read(turn: dict) -> bool:
    """The env read an action from the turn's reply, or a tool call in it ran."""
    if turn.get("failed"):
        return False
    return turn.get("action") is not None or any("result" in c for c in turn.get("tool_calls") or ())


def format_ok(ep: dict, by_action: bool) -> bool:
    """No error, and (by_action: the env reports its actions) every turn's reply read."""
    return ep.get("error") is None and (not by_action or all(turn_read(t) for t in ep.get("turns") or ()))


def measure(base: list[dict], members: list[list[dict]], by_action: bool) -> dict:
    """One sigma's figures: base holds the unperturbed episodes, one per task; members, per member, its
    episodes on the same tasks in the same order (module docstring)."""
    if not base or not members:
        raise ValueError("measure needs the base's episodes and at least one member's")
    for m in members:
        if [e.get("task") for e in m] != [b.get("task") for b in base]:
            raise ValueError("a member's episodes are not of the base's tasks, in the base's order")
    pairs = [(b, m[i]) for m in members for i, b in enumerate(base)]
    n = len(pairs)
    per_task = []
    for i, b in enumerate(base):
        rewards = [m[i]["reward"] for m in members]
        per_task.append({"task": b.get("task"), "base_reward": b["reward"], "rewards": rewards,
                         "tied": max(rewards) == min(rewards), "spread": max(rewards) - min(rewards)})
    tied = sum(t["tied"] for t in per_task) / len(per_task)
    return {
        "replies_changed": sum(replies(e) != replies(b) for b, e in pairs) / n,
        "format_changed": sum(format_ok(e, by_action) != format_ok(b, by_action) for b, e in pairs) / n,
        "format_broken": sum(format_ok(b, by_action) and not format_ok(e, by_action) for b, e in pairs) / n,
        "reward_changed": sum(e["reward"] != b["reward"] for b, e in pairs) / n,
        "tasks_tied": tied, "signal_share": 1.0 - tied,
        "spread": sum(t["spread"] for t in per_task) / len(per_task),
        "errors": sum(e.get("error") is not None for _, e in pairs), "episodes": n, "per_task": per_task,
    }


def episodes_hint(tied: float) -> int | None:
    """Tasks per member so that all of a generation's tasks tie with chance <= NO_SIGNAL_CHANCE (None: every
    task tied, so no number of tasks helps)."""
    if tied >= 1.0:
        return None
    if tied <= 0.0:
        return 1
    return max(1, math.ceil(math.log(NO_SIGNAL_CHANCE) / math.log(tied)))


def population_hint(moved: float, antithetic: bool) -> int | None:
    """Members so that MIN_MOVED per task move off the base's reward on average (None: none moved)."""
    if moved <= 0.0:
        return None
    n = max(2, math.ceil(MIN_MOVED / moved))
    return n + (n % 2) if antithetic else n


def recommend(rows: dict[float, dict], antithetic: bool = True) -> dict:
    """The sigma to train with, from measure()'s figures per sigma, with why (module docstring); a heuristic."""
    tried = sorted(s for s in rows if s > 0) or sorted(rows)
    safe = [s for s in tried if rows[s]["format_broken"] <= FORMAT_BREAK_MAX]
    good = [s for s in safe if rows[s]["signal_share"] >= SIGNAL_SHARE]
    if good:
        sigma, verdict = good[0], "ok"
        why = (f"the smallest sigma tried whose members' rewards differ on >= {SIGNAL_SHARE:.0%} of the tasks "
               f"({rows[sigma]['signal_share']:.0%}) while the format breaks on <= {FORMAT_BREAK_MAX:.0%} of the "
               f"episodes ({rows[sigma]['format_broken']:.0%})")
    elif safe:
        sigma = max(safe, key=lambda s: (rows[s]["signal_share"], s))
        verdict = "weak"
        if safe[-1] == tried[-1]:
            r = rows[safe[-1]]
            why = (f"no sigma tried makes the members' rewards differ on {SIGNAL_SHARE:.0%} of the tasks (best "
                   f"{rows[sigma]['signal_share']:.0%}); " + (
                       f"replies changed on {r['replies_changed']:.0%} of the episodes at sigma {safe[-1]:g} but "
                       "rewards hardly moved: the reward is flat around this model; a task with more room (esopt "
                       "bench room) or a denser reward" if r["replies_changed"] >= SIGNAL_SHARE else
                       f"replies changed on only {r['replies_changed']:.0%} of the episodes at sigma {safe[-1]:g}: "
                       "try larger sigmas"))
        else:
            why = (f"the format breaks (> {FORMAT_BREAK_MAX:.0%} of the episodes) before the rewards differ on "
                   f"{SIGNAL_SHARE:.0%} of the tasks: this is the sigma with the most signal "
                   f"({rows[sigma]['signal_share']:.0%}) that keeps the format; the task may lack room")
    else:
        sigma, verdict = tried[0], "format"
        why = (f"every sigma tried breaks the format on > {FORMAT_BREAK_MAX:.0%} of the episodes (the smallest: "
               f"{rows[sigma]['format_broken']:.0%}): try smaller sigmas")
    r = rows[sigma]
    return {"sigma": sigma, "verdict": verdict, "why": why,
            "episodes_per_member": episodes_hint(r["tasks_tied"]),
            "population": population_hint(r["reward_changed"], antithetic)}


# -- the command ---------------------------------------------------------------------------------------


def _flags(a) -> list[float]:
    from ..utils.settings import ConfigError

    try:
        sigmas = [float(x) for x in a.sigmas.split(",") if x.strip()]
    except ValueError:
        sigmas = []
    if not sigmas or any(not math.isfinite(s) or s < 0 for s in sigmas):
        raise ConfigError(f"--sigmas takes comma-separated numbers >= 0, got {a.sigmas!r}")
    if a.members < 1:
        raise ConfigError(f"--members must be >= 1, got {a.members}")
    if a.tasks < 1:
        raise ConfigError(f"--tasks must be >= 1, got {a.tasks}")
    if a.out and not Path(a.out).resolve().parent.is_dir():
        raise ConfigError(f"--out {a.out}: folder {Path(a.out).parent} does not exist")
    return list(dict.fromkeys(sigmas))


def _log(line: str) -> None:
    print(f"[esopt probe] {line}", file=sys.stderr, flush=True)


def tasks_of(cfg, source, m: int):
    """A fresh set of the probed tasks (envs, ids, observations) and the split they come from: the validation
    split's first m (all of it when smaller), else the training split's first generation; never held-out."""
    from ..agent.rollout import close_quietly

    if cfg.tasks.validation:
        envs, ids, obs = source.validation()
        n = min(m, cfg.tasks.validation, len(envs))
        for env in envs[n:]:
            close_quietly(env)
        return envs[:n], ids[:n], obs[:n], "validation"
    envs, ids, obs = source.train(m, 0)
    return envs, ids, obs, "train"


def run(a) -> int:
    from ..config import load_config
    from ..utils.args import default_config, split_args
    from ..utils.settings import ConfigError

    config, overrides = split_args(a.args)
    sigmas = _flags(a)
    cfg = load_config(config or default_config(), overrides)
    if cfg.es.antithetic and a.members % 2:
        raise ConfigError(f"--members must be even with es.antithetic=true (members come in +/- pairs), got "
                          f"{a.members}")
    result = probe(cfg, sigmas, a.members, a.tasks)
    print_table(result)
    if a.out:
        _write(a.out, result)
        print(f"[esopt probe] figures written to {a.out}")
    rec = result["recommendation"]
    for key in ("episodes_per_member", "population"):
        if rec[key] is not None:
            print(f"RESULT probe_{key}={rec[key]}")
    print(f"RESULT probe_sigma={rec['sigma']:g}")  # the headline, last
    return 0


def probe(cfg, sigmas: list[float], members: int, tasks: int) -> dict:
    """Play the probe (module docstring) and return its figures: per sigma, the recommendation, the tasks."""
    from ..es.build import make_perturber
    from ..es.strategy import Strategy
    from ..models import HFPolicy, load_model
    from ..train import stop
    from ..train.evaluate import run_episodes
    from ..train.member_weights import member_weights
    from ..train.preflight import check_run_config
    from ..train.tasks import TaskSource
    from ..utils.seeding import derive_seed
    from ..utils.threads import set_threads
    from .method.room import CONSTANT_SHARE, top_reply

    split = "validation" if cfg.tasks.validation else "train"
    check_run_config(cfg, splits=(split,))
    if cfg.runtime.threads:
        set_threads(cfg.runtime.threads)
    t0 = time.time()
    model, tok = load_model(cfg.model, cfg.runtime.dtype, cfg.runtime.device)
    policy, source = HFPolicy.for_agent(model, tok, cfg.agent), TaskSource(cfg.env, cfg.tasks, cfg.run.seed)
    perturber = make_perturber(model, cfg.es)
    perturber.prepare()
    chosen = Strategy(members, derive_seed("probe-members", cfg.run.seed), cfg.es.antithetic).ask(
        0, getattr(perturber, "stream_keys", None))
    seed = derive_seed("probe-rollout", cfg.run.seed)

    def play(member=None, sigma=0.0) -> list[dict]:
        envs, ids, obs, _ = tasks_of(cfg, source, tasks)
        if member is None:  # the base: nothing perturbed, in place or as side terms
            return [ep.to_json() for ep in run_episodes(policy, envs, ids, obs, cfg, seed)]
        weights = member_weights(perturber, [member], sigma, [0] * len(envs))  # every row plays the one member
        with weights.in_place:
            return [ep.to_json() for ep in run_episodes(policy, envs, ids, obs, cfg, seed, rows=weights.rows)]

    with stop.phase("the probe", kept="nothing (its figures are written when it ends)"):
        base = play()
        n = len(base)
        _log(f"{n} {split} tasks (never held-out), {len(sigmas)} sigmas x {len(chosen)} members: "
             f"{n * (1 + len(sigmas) * len(chosen))} episodes; base played in {time.time() - t0:.0f}s")
        played: dict[float, list[list[dict]]] = {}
        for s in sigmas:
            played[s] = []
            for k, m in enumerate(chosen):
                played[s].append(play(m, s))
                _log(f"sigma {s:g}: member {k + 1}/{len(chosen)} played ({time.time() - t0:.0f}s so far)")
    by_action = reports_actions(base + [e for eps in played.values() for m in eps for e in m])
    rows = {s: measure(base, played[s], by_action) for s in sigmas}
    reply, share, distinct = top_reply(base)
    return {"config": {"model": cfg.model, "env": cfg.env.id, "es.noise": cfg.es.noise, "es.scope": cfg.es.scope,
                       "es.sigma_scale": cfg.es.sigma_scale, "es.antithetic": cfg.es.antithetic,
                       "es.sigma.start": cfg.es.sigma.start, "es.population": cfg.es.population,
                       "es.episodes_per_member": cfg.es.episodes_per_member},
            "split": split, "tasks": [ep["task"] for ep in base], "members": [[m.seed, m.sign] for m in chosen],
            "episodes": n * (1 + len(sigmas) * len(chosen)),
            "format_signal": "action read, no error" if by_action else "no error (no reply was read as an action)",
            "base": {"reward": sum(ep["reward"] for ep in base) / n, "top_reply": reply, "top_reply_share": share,
                     "distinct_replies": distinct, "constant": share >= CONSTANT_SHARE},
            "sigmas": {f"{s:g}": r for s, r in rows.items()},
            "recommendation": recommend(rows, cfg.es.antithetic),
            "thresholds": {"signal_share": SIGNAL_SHARE, "format_break_max": FORMAT_BREAK_MAX,
                           "no_signal_chance": NO_SIGNAL_CHANCE, "min_moved": MIN_MOVED},
            "seconds": time.time() - t0}


def print_table(result: dict) -> None:
    c, base = result["config"], result["base"]
    print(f"[esopt probe] {c['model']} on {c['env']}: {len(result['tasks'])} {result['split']} tasks, "
          f"{len(result['members'])} members per sigma, {result['episodes']} episodes; base reward "
          f"{base['reward']:.3f}; format = {result['format_signal']}")
    if base["constant"]:
        print(f"[esopt probe] note: the base gives the same replies on {base['top_reply_share']:.0%} of the tasks "
              f"({base['top_reply']!r}): its reward is a constant's (esopt bench room)")
    head = ("sigma", "replies chg", "format chg", "format broken", "reward chg", "tasks tied", "spread", "errors")
    print("  ".join(f"{h:>13}" for h in head))
    for s, r in result["sigmas"].items():
        cells = [s] + [f"{r[k]:.0%}" for k in ("replies_changed", "format_changed", "format_broken", "reward_changed",
                                               "tasks_tied")] + [f"{r['spread']:.3f}", str(r["errors"])]
        print("  ".join(f"{x:>13}" for x in cells))
    rec = result["recommendation"]
    print(f"[esopt probe] recommended sigma {rec['sigma']:g} ({rec['verdict']}): {rec['why']} (config's es.sigma "
          f"starts at {c['es.sigma.start']:g})")
    hints = []
    if rec["episodes_per_member"] is not None:
        hints.append(f"es.episodes_per_member >= {rec['episodes_per_member']} (now {c['es.episodes_per_member']}) "
                     f"so that a generation's tasks all tie with chance <= {NO_SIGNAL_CHANCE:.0%}")
    if rec["population"] is not None:
        hints.append(f"es.population >= {rec['population']} (now {c['es.population']}) for about {MIN_MOVED} members "
                     "per task whose reward moves")
    print("[esopt probe] heuristic hints at that sigma: " + ("; ".join(hints) if hints else
          "none (no member's reward moved: a larger sigma, or a task with more room)"))


def _write(path: str, result: dict) -> None:
    """The JSON, written whole or not at all (a temporary file beside it, renamed into place)."""
    from .common import machine

    tmp = Path(f"{path}.tmp{os.getpid()}")
    tmp.write_text(json.dumps({"command": "probe", "machine": machine(), **result}, indent=1))
    os.replace(tmp, path)
