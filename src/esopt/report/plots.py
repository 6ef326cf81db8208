"""PNG plots of a run, and overlays of several runs (matplotlib, Agg canvas).

Each function returns a ``Plot``: PNG bytes, or None with a note saying why
there is nothing to draw (the page shows the note instead).
"""
from __future__ import annotations

import math
import re

from ..es.schedules import SCHEDULES, scheduled
from .figure import Plot, _figure, _int_ticks, _png
from .load import RunData

PHASES = {"time_rollout": "rollout (generation)", "time_perturb": "perturbation", "time_restore": "restore",
          "time_update": "update", "time_hash": "weights hash", "time_kernels": "noise kernels (once per process)"}
MEMORY_KEY = re.compile(r"(mem|rss)", re.I)


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _series(rows: list[dict], key: str) -> tuple[list[int], list[float]]:
    pts = [(r["generation"], r[key]) for r in rows if _num(r.get(key))]
    return [p[0] for p in pts], [p[1] for p in pts]


# ------------------------------------------------------------------ one run
def rewards(run: RunData) -> Plot:
    title = "Training reward per generation"
    gens, mean = _series(run.train, "reward_mean")
    if not gens:
        return Plot("rewards", title, None, "no generation recorded yet")
    fig, (ax,) = _figure()
    g2, lo = _series(run.train, "reward_min")
    g3, hi = _series(run.train, "reward_max")
    if g2 == gens == g3:
        ax.fill_between(gens, lo, hi, alpha=0.18, color="C0", label="population min-max")
    gs, std = _series(run.train, "reward_std")
    if gs == gens:
        ax.plot(gens, [m + s for m, s in zip(mean, std)], "--", color="C0", lw=0.8, label="mean ± std")
        ax.plot(gens, [m - s for m, s in zip(mean, std)], "--", color="C0", lw=0.8)
    xs, ys = [], []
    for rec in run.records:
        for r in rec.get("rewards") or []:
            if _num(r):
                xs.append(rec.get("generation"))
                ys.append(r)
    if xs:
        ax.scatter(xs, ys, s=9, color="0.35", alpha=0.6, label="members", zorder=3)
    ax.plot(gens, mean, "o-", color="C0", label="mean", zorder=4)
    es = run.algorithm.record == "history"  # members with a reward each
    ax.set_xlabel(run.algorithm.step_name)
    ax.set_ylabel("member reward (mean over its episodes)" if es else "episode reward")
    _int_ticks(ax)
    ax.legend(fontsize=8)
    return Plot("rewards", title, _png(fig))


def heldout(run: RunData) -> Plot:
    title = "Held-out and validation evaluation"
    gens, rew = _series(run.evals, "heldout_reward")
    vgens, vrew = _series(run.evals, "validation_reward")
    if not gens and not vgens:
        return Plot("heldout", title, None, "no held-out evaluation yet")
    fig, (ax,) = _figure()
    if gens:
        _, se = _series([e for e in run.evals if _num(e.get("heldout_reward"))], "heldout_reward_se")
        ax.errorbar(gens, rew, yerr=se if len(se) == len(gens) else None, fmt="o-", capsize=4,
                    label="held-out reward ± SE")
        gs, solved = _series(run.evals, "heldout_solved")
        if gs:
            ax.plot(gs, solved, "s--", color="C2", label="held-out solved rate")
    if vgens:  # the centre's progress during the run (held-out is played only at the start and the end)
        _, vse = _series([e for e in run.evals if _num(e.get("validation_reward"))], "validation_reward_se")
        ax.errorbar(vgens, vrew, yerr=vse if len(vse) == len(vgens) else None, fmt="^-", capsize=4, color="C1",
                    label="validation reward ± SE")
    ax.set_xlabel("generations trained")
    ax.set_ylabel("reward of the unperturbed weights")
    _int_ticks(ax)
    ax.legend(fontsize=8)
    return Plot("heldout", title, _png(fig))


def _at_seconds(run: RunData, rows: list[dict]) -> list[dict]:
    """Evaluation rows with "generation" replaced by the training seconds after that many updates
    (train/loop.py: time_* figures, evaluations excluded); rows of updates without timings are dropped."""
    from ..train.loop import seconds_by_update

    timed = []
    for r in run.train:  # up to the first generation known only from the history (no timings)
        if not any(k.startswith("time_") for k in r):
            break
        timed.append(r)
    at = seconds_by_update(timed)
    return [{**r, "generation": at[r["generation"]]} for r in rows if r.get("generation") in at]


def seconds_curve(run: RunData) -> Plot:
    """Validation (and held-out) reward against training seconds: what a run buys with its time."""
    title = "Evaluation reward vs training seconds"
    rows = _at_seconds(run, run.evals)
    series = [(key, fmt, color, label, *_series(rows, key))
              for key, fmt, color, label in (("validation_reward", "^-", "C1", "validation"),
                                             ("heldout_reward", "o-", "C0", "held-out"))]
    series = [s for s in series if s[4]]
    if not series:
        return Plot("seconds", title, None, "no evaluation with recorded training seconds yet")
    fig, (ax,) = _figure()
    for key, fmt, color, label, xs, ys in series:
        _, se = _series([r for r in rows if _num(r.get(key))], f"{key}_se")
        ax.errorbar(xs, ys, yerr=se if len(se) == len(xs) else None, fmt=fmt, capsize=4, color=color,
                    label=f"{label} reward ± SE")
    ax.set_xlabel("training seconds (evaluations excluded)")
    ax.set_ylabel("reward of the unperturbed weights")
    ax.legend(fontsize=8)
    return Plot("seconds", title, _png(fig))


def _planned(run: RunData, name: str) -> tuple[list[int], list[float]] | None:
    s, total = run.cfg(f"es.{name}"), run.cfg("es.schedule_generations") or run.planned
    if not run.algorithm.schedules or not isinstance(s, dict) or not total or s.get("schedule", "cosine") not in SCHEDULES:
        return None
    try:
        xs = list(range(total))
        return xs, [scheduled(s.get("schedule", "cosine"), float(s["start"]), float(s["end"]), t, total,
                              int(s.get("warmup", 0))) for t in xs]
    except (KeyError, TypeError, ValueError):
        return None


def schedules(run: RunData) -> Plot:
    title = "Sigma and alpha schedules"
    plans = {k: _planned(run, k) for k in ("sigma", "alpha")}
    used = {k: _series(run.train, k) for k in ("sigma", "alpha")}
    if not any(used[k][0] or plans[k] for k in used):
        if not run.algorithm.schedules:
            return Plot("schedules", title, None, f"not an ES run (algo: {run.algo}): no sigma or alpha")
        return Plot("schedules", title, None, "no generation recorded and no schedule in config.yaml")
    fig, axes = _figure(cols=2)
    for ax, k in zip(axes, ("sigma", "alpha")):
        if plans[k]:
            ax.plot(*plans[k], "--", color="0.5", label="planned (config)")
        if used[k][0]:
            ax.plot(*used[k], "o-", color="C1" if k == "sigma" else "C3", ms=4, label="used")
        ax.set_title(k)
        ax.set_xlabel("generation")
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        _int_ticks(ax)
        ax.legend(fontsize=8)
    return Plot("schedules", title, _png(fig))


def timing(run: RunData) -> Plot:
    title = "Time per phase"
    rows = [r for r in run.train if any(k.startswith("time_") for k in r)]
    eg, es = _series(run.evals, "heldout_seconds")
    if not rows and not eg:
        return Plot("time", title, None, "no timings recorded (metrics.jsonl has no time_* fields)")
    fig, axes = _figure(cols=2, width=9)
    ax = axes[0]
    keys = [k for k in PHASES if any(k in r for r in rows)]
    keys += sorted({k for r in rows for k in r if k.startswith("time_") and k not in PHASES})
    gens = [r["generation"] for r in rows]
    bottom = [0.0] * len(rows)
    for i, k in enumerate(keys):
        vals = [r.get(k) if _num(r.get(k)) else 0.0 for r in rows]
        ax.bar(gens, vals, bottom=bottom, color=f"C{i}", label=PHASES.get(k, k[5:]))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_title("one generation (seconds)")
    ax.set_xlabel("generation")
    _int_ticks(ax)
    if keys:
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3)
    ax = axes[1]
    if eg:
        ax.bar(eg, es, color="C9")
    else:
        ax.text(0.5, 0.5, "no evaluation timing", ha="center", va="center", transform=ax.transAxes)
    ax.set_title("held-out evaluation (seconds)")
    ax.set_xlabel("after generations")
    _int_ticks(ax)
    return Plot("time", title, _png(fig))


def memory_keys(run: RunData) -> list[str]:
    return sorted({k for r in run.train + run.evals for k, v in r.items() if MEMORY_KEY.search(k) and _num(v)})


def memory(run: RunData) -> Plot:
    title = "Memory"
    keys = memory_keys(run)
    if not keys:
        return Plot("memory", title, None, "not recorded by this run (no memory field in metrics.jsonl)")
    fig, (ax,) = _figure()
    for k in keys:
        ax.plot(*_series(run.train + run.evals, k), "o-", ms=4, label=k)
    ax.set_xlabel("generation")
    _int_ticks(ax)
    ax.legend(fontsize=8)
    return Plot("memory", title, _png(fig))


def run_plots(run: RunData) -> list[Plot]:
    from .context import context_plot

    plots = [rewards(run), heldout(run), seconds_curve(run), schedules(run), timing(run), memory(run)]
    ctx = context_plot(run)  # only for a context search (coevo)
    return plots + ([ctx] if ctx is not None else [])


# --------------------------------------------------------------- comparison
def compare_plots(runs: list[RunData], labels: list[str]) -> list[Plot]:
    return [_overlay(runs, labels, "compare-reward", "Training reward mean (band: population min-max)",
                     "reward_mean", "train", band=("reward_min", "reward_max")),
            _overlay(runs, labels, "compare-heldout", "Held-out reward ± SE", "heldout_reward", "evals",
                     err="heldout_reward_se"),
            _overlay(runs, labels, "compare-heldout-episodes", "Held-out reward ± SE vs training episodes played",
                     "heldout_reward", "evals", err="heldout_reward_se", per_episode=True),
            _overlay(runs, labels, "compare-validation-seconds", "Validation reward ± SE vs training seconds",
                     "validation_reward", "evals", err="validation_reward_se", per_second=True),
            _overlay(runs, labels, "compare-sigma", "Sigma per generation", "sigma", "train"),
            _overlay(runs, labels, "compare-alpha", "Alpha per generation", "alpha", "train"),
            _overlay(runs, labels, "compare-time", "Seconds per generation", "seconds", "train")]


def _with_seconds(rows: list[dict]) -> list[dict]:
    return [{**r, "seconds": sum(v for k, v in r.items() if k.startswith("time_") and _num(v))}
            for r in rows if any(k.startswith("time_") for k in r)]


def _overlay(runs, labels, key, title, field, source, band=None, err=None, per_episode=False,
             per_second=False) -> Plot:
    fig, (ax,) = _figure()
    drawn, without = 0, []
    for i, (run, label) in enumerate(zip(runs, labels)):
        rows = getattr(run, source)
        if field == "seconds":
            rows = _with_seconds(rows)
        if per_episode:
            rows = [{**r, "generation": r["generation"] * run.episodes_per_generation}
                    for r in rows] if run.episodes_per_generation else []
        if per_second:
            rows = _at_seconds(run, rows)
        gens, ys = _series(rows, field)
        if not gens:
            without.append(label)
            continue
        drawn += 1
        color = f"C{i % 10}"
        if band:
            g1, lo = _series(rows, band[0])
            g2, hi = _series(rows, band[1])
            if g1 == gens == g2:
                ax.fill_between(gens, lo, hi, color=color, alpha=0.12)
        if err:
            _, e = _series([r for r in rows if _num(r.get(field))], err)
            ax.errorbar(gens, ys, yerr=e if len(e) == len(gens) else None, fmt="o-", capsize=3, color=color,
                        label=label)
        else:
            ax.plot(gens, ys, "o-", ms=4, color=color, label=label)
    if not drawn:
        return Plot(key, title, None, "none of the runs has this yet")
    ax.set_xlabel("training episodes played" if per_episode else "training seconds (evaluations excluded)"
                  if per_second else "generation (GRPO: step)")
    if field in ("sigma", "alpha"):
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    if not (per_episode or per_second):
        _int_ticks(ax)
    ax.legend(fontsize=8)
    note = f"no data here for: {', '.join(without)}" if without else ""
    return Plot(key, title, _png(fig), note)
