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
PEAK = "peak_rss_mb"  # the process's peak RSS so far, on every training and evaluation line (utils/memory.py)


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _series(rows: list[dict], key: str, shift: int = 0) -> tuple[list[int], list[float]]:
    """(x, value) of the rows that have `key`: x is the row's "generation" + shift. Training rows record
    their update's index from 0 and are drawn with shift=1 (generation 1 is the first, as the status's
    "3 of 3 generations" counts); evaluation rows record the updates done before them (0: before training)."""
    pts = [(r["generation"] + shift, r[key]) for r in rows if _num(r.get(key))]
    return [p[0] for p in pts], [p[1] for p in pts]


def _train(rows: list[dict], key: str) -> tuple[list[int], list[float]]:
    """A training series, numbered from 1."""
    return _series(rows, key, shift=1)


# ------------------------------------------------------------------ one run
def rewards(run: RunData) -> Plot:
    title = "Training reward per generation"
    gens, mean = _train(run.train, "reward_mean")
    if not gens:
        return Plot("rewards", title, None, "no generation recorded yet")
    fig, (ax,) = _figure()
    g2, lo = _train(run.train, "reward_min")
    g3, hi = _train(run.train, "reward_max")
    if g2 == gens == g3:
        ax.fill_between(gens, lo, hi, alpha=0.18, color="C0", label="population min-max")
    gs, std = _train(run.train, "reward_std")
    if gs == gens:
        ax.plot(gens, [m + s for m, s in zip(mean, std)], "--", color="C0", lw=0.8, label="mean ± std")
        ax.plot(gens, [m - s for m, s in zip(mean, std)], "--", color="C0", lw=0.8)
    xs, ys = [], []
    for rec in run.records:
        if not isinstance(rec.get("generation"), int):
            continue
        for r in rec.get("rewards") or []:
            if _num(r):
                xs.append(rec["generation"] + 1)
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
        return [t + 1 for t in range(total)], [scheduled(s.get("schedule", "cosine"), float(s["start"]), float(s["end"]),
                                                         t, total, int(s.get("warmup", 0))) for t in range(total)]
    except (KeyError, TypeError, ValueError):
        return None


def schedules(run: RunData) -> Plot:
    title = "Sigma and alpha schedules"
    plans = {k: _planned(run, k) for k in ("sigma", "alpha")}
    used = {k: _train(run.train, k) for k in ("sigma", "alpha")}
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
    gens = [r["generation"] + 1 for r in rows]
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
    ax.set_xlabel("generations done")
    _int_ticks(ax)
    return Plot("time", title, _png(fig))


def signal(run: RunData) -> Plot:
    """ES's signal diagnostics per generation (algos/es/diagnostics.py): why a generation was flat."""
    title = "Signal diagnostics (why a generation was flat)"
    shares = [(k, label) for k, label in (("diag_tied_task_share", "tasks where all members tie"),
                                          ("diag_identical_pair_share", "antithetic pairs replying alike"),
                                          ("diag_update_moved_share", "weights the update moved"),
                                          ("diag_update_cosine", "cosine realised vs intended update"))
              if _train(run.train, k)[0]]
    counts = [(k, label) for k, label in (("diag_distinct_replies", "distinct first-turn replies per task"),
                                          ("diag_reward_spread", "per-task reward std (mean over tasks)"))
              if _train(run.train, k)[0]]
    if not shares and not counts:
        if run.algorithm.record != "history":
            return Plot("signal", title, None, f"not an ES run (algo: {run.algo}): no signal diagnostics")
        return Plot("signal", title, None, "no signal diagnostics recorded (metrics.jsonl has no diag_* fields)")
    fig, axes = _figure(cols=2, width=10)
    for ax, keys, ylabel in ((axes[0], shares, "share"), (axes[1], counts, "per task")):
        for i, (k, label) in enumerate(keys):
            ax.plot(*_train(run.train, k), "o-", ms=3, color=f"C{i if ylabel == 'share' else i + 4}", label=label)
        if ylabel == "share":
            ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel(run.algorithm.step_name)
        ax.set_ylabel(ylabel)
        _int_ticks(ax)
        if keys:
            ax.legend(fontsize=7)
    return Plot("signal", title, _png(fig))


def memory_keys(run: RunData) -> list[str]:
    return sorted({k for r in run.train + run.evals for k, v in r.items() if MEMORY_KEY.search(k) and _num(v)})


def _memory_points(run: RunData, key: str) -> tuple[list[int], list[float]]:
    """A memory field over the run: evaluations at the updates done before them, training lines at
    their update's number (from 1), in the order they were written."""
    pts = sorted([(x, 1, y) for x, y in zip(*_series(run.evals, key))]  # update k's line, then the evaluation after it
                 + [(x, 0, y) for x, y in zip(*_train(run.train, key))])
    return [p[0] for p in pts], [p[2] for p in pts]


def memory_figures(run: RunData) -> dict:
    """The run's recorded peak RSS (metrics' peak_rss_mb: the process's peak so far, written by every
    training and evaluation line): {"training": the largest after an update, "inference": the one after
    the evaluation before the first update (loading the model and playing the base evaluation, no update
    yet), "updates": updates with a figure}; empty when the run recorded none."""
    out: dict = {}
    train = [r[PEAK] for r in run.train if _num(r.get(PEAK))]
    if train:
        out.update(training=max(train), updates=len(train))
    start = [e[PEAK] for e in run.evals if e.get("generation") == 0 and _num(e.get(PEAK))]
    if start:
        out["inference"] = start[-1]
    return out


BENCH_FILES = ("bench-results/es-memory.json",)  # from the working folder, then from esopt's source tree


def bench_memory() -> dict | None:
    """bench-results/es-memory.json (esopt bench es-memory), if one is found: the working folder's, else
    the one beside esopt's source (a checkout); None without one or when it cannot be read."""
    import json
    from pathlib import Path

    roots = [Path.cwd(), Path(__file__).resolve().parents[3]]
    for root in roots:
        for name in BENCH_FILES:
            path = root / name
            try:
                data = json.loads(path.read_text())
                peaks = data["median_peak_rss_mb"]
                return {"path": str(path), "es": float(peaks["es"]), "inference": float(peaks["inference"]),
                        "machine": data.get("machine") or {}, "config": data.get("config"),
                        "repeats": data.get("repeats")}
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return None


def memory_text(run: RunData) -> str:
    """One line on the run's memory: its recorded peaks (training vs inference only), or else the figure
    of `esopt bench es-memory` if one is found, labelled as a benchmark's."""
    f = memory_figures(run)
    step = run.algorithm.step_name
    process = "peak RSS of the esopt process (with --workers: the driver's, not the Ray workers')"
    table = (run.meta.get("noise") or {}).get("table_mib") if isinstance(run.meta.get("noise"), dict) else None
    before = (f"before the first {step}: the model loaded"
              + (f", the noise table of {table:,.0f} MiB made" if _num(table) else "")
              + ", the base evaluation played (inference only, no update yet)")
    if "training" in f and "inference" in f:
        return (f"{process}: {f['training']:,.0f} MB while training ({f['updates']} {step}(s) recorded) vs "
                f"{f['inference']:,.0f} MB {before}; training / inference {f['training'] / f['inference']:.2f}")
    if "training" in f:
        return (f"{process}: {f['training']:,.0f} MB while training ({f['updates']} {step}(s) recorded); no "
                "evaluation before the first one to compare with (eval.at_start=false)")
    if "inference" in f:
        return f"{process}: {f['inference']:,.0f} MB {before}; no {step} recorded yet"
    bench = bench_memory()
    if bench is None:
        return "not recorded by this run (no memory field in metrics.jsonl)"
    m = bench["machine"]
    where = ", ".join(str(x) for x in (m.get("platform"), f"{m['cpus']} CPUs" if m.get("cpus") else None,
                                       f"torch {m['torch']}" if m.get("torch") else None, m.get("date")) if x)
    return (f"not recorded by this run (its metrics.jsonl has no memory field). For scale, a benchmark's figure, "
            f"not this run's: `esopt bench es-memory` ({bench['path']}) on {bench['config']} measured one ES "
            f"generation at a peak RSS of {bench['es']:,.0f} MB vs {bench['inference']:,.0f} MB for inference of "
            f"the same episodes (ratio {bench['es'] / bench['inference']:.2f}; median of {bench['repeats']} "
            f"fresh processes each) on {where}")


def memory(run: RunData) -> Plot:
    title = "Memory"
    keys = memory_keys(run)
    if not keys:
        return Plot("memory", title, None, memory_text(run))
    fig, (ax,) = _figure()
    for k in keys:
        ax.plot(*_memory_points(run, k), "o-", ms=4, label="peak RSS of the process so far" if k == PEAK else k)
    start = memory_figures(run).get("inference")
    if start is not None and PEAK in keys:
        ax.axhline(start, ls="--", color="0.5", lw=0.8, label="before the first update (inference only)")
    ax.set_xlabel(f"{run.algorithm.step_name}s done")
    ax.set_ylabel("MB")
    _int_ticks(ax)
    ax.legend(fontsize=8)
    return Plot("memory", title, _png(fig))


def run_plots(run: RunData) -> list[Plot]:
    from .context import context_plot

    plots = [rewards(run), heldout(run), seconds_curve(run), schedules(run), signal(run), timing(run), memory(run)]
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
        shift = 1 if source == "train" else 0  # training rows numbered from 1, evaluations by updates done
        gens, ys = _series(rows, field, shift)
        if not gens:
            without.append(label)
            continue
        drawn += 1
        color = f"C{i % 10}"
        if band:
            g1, lo = _series(rows, band[0], shift)
            g2, hi = _series(rows, band[1], shift)
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
                  if per_second else "generation (GRPO: step)" if source == "train"
                  else "generations done (GRPO: steps)")
    if field in ("sigma", "alpha"):
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    if not (per_episode or per_second):
        _int_ticks(ax)
    ax.legend(fontsize=8)
    note = f"no data here for: {', '.join(without)}" if without else ""
    return Plot(key, title, _png(fig), note)
