"""The outer loop every trainer shares: held-out evaluation at the start,
one update per iteration with a progress bar and a log line, periodic
checkpoints and evaluations, the final evaluation, then the run's summary.

Training seconds are the time_* figures of the updates (evaluations excluded; those of
earlier processes counted on a resume).

run.budget_seconds stops training at equal wall-clock instead of equal updates: the run
ends once one more update would take it further past the budget than stopping leaves it
short of it (the next update is estimated to take as long as the last one: it starts only
if at least half of it fits), so a run's training time lands within half an update of the
budget, whatever its update's size; the first update always runs. The run then ends as if
that update were its last (final checkpoint and evaluation, summary). Schedules keep their
configured length.

eval.every_seconds evaluates (as eval.every does) after the first update at which the
training seconds pass each multiple of it: one run gives its curve against training time."""
from __future__ import annotations

import math
import time
from typing import Callable

from . import stop


def training_seconds(stats: dict) -> float:
    """Seconds of one update: the sum of its time_* figures (what `esopt bench` reports as training time)."""
    return float(sum(v for k, v in stats.items() if k.startswith("time_") and isinstance(v, (int, float))))


def seconds_by_update(metrics: list[dict]) -> dict[int, float]:
    """{updates done: training seconds after them} from a run's metrics lines (0: 0.0)."""
    out, spent = {0: 0.0}, 0.0
    for m in metrics:
        if m.get("kind") == "train":
            spent += training_seconds(m)
            out[m["generation"] + 1] = spent
    return out


def spent_before(run, start: int) -> float:
    """Training seconds of the updates before `start` recorded in the run's metrics (a resumed run)."""
    if not start:
        return 0.0
    return sum(training_seconds(m) for m in run.metrics() if m.get("kind") == "train" and m.get("generation", 0) < start)


def last_update_before(run, start: int) -> float:
    """Training seconds of the last update before `start` in the run's metrics (0.0: none)."""
    if not start:
        return 0.0
    lines = [m for m in run.metrics() if m.get("kind") == "train" and m.get("generation", 0) < start]
    return training_seconds(lines[-1]) if lines else 0.0


def budget_reached(spent: float, last: float, budget: float | None) -> bool:
    """Stop before the next update? Yes once less than half of an update like the last one fits."""
    return budget is not None and spent + last / 2 >= budget


def next_mark(spent: float, every: float | None) -> float:
    """The first multiple of `every` above `spent` (inf without eval.every_seconds)."""
    return (math.floor(spent / every) + 1) * every if every else math.inf


def train_loop(trainer, start: int, total: int, bar, describe: Callable[[int, dict, float], str],
               checkpoint: Callable[[int], None] | None = None, checkpoint_every: int = 0) -> dict:
    """Run trainer.generation(t, bar) for t in [start, total) (fewer under run.budget_seconds);
    returns trainer.finish(evals), whose last key is the number of updates made. A stop asked for
    (train/stop.py) ends the loop before an update with stop.Stopped(updates done).

    describe(t, stats, seconds) is the log line of one update; checkpoint(done) is
    called every `checkpoint_every` updates and after the last one.
    """
    every, every_s = trainer.cfg.eval.every, trainer.cfg.eval.every_seconds
    budget = trainer.cfg.run.budget_seconds
    timed = budget is not None or every_s is not None
    spent = spent_before(trainer.run, start) if timed else 0.0
    last_s = last_update_before(trainer.run, start) if budget is not None else 0.0
    mark = next_mark(spent, every_s)
    evals = {}
    log = trainer.log
    if log is print:  # lines printed while the bar is drawn go above it, not glued onto it
        trainer.log = bar.write
    last = start
    try:
        if start == 0 and trainer.cfg.eval.at_start:
            evals[0] = trainer.evaluate(0, boundary=True)
        for t in range(start, total):
            if stop.requested():  # a safe point: every update before t is recorded
                if checkpoint is not None and t > start:
                    checkpoint(t)
                raise stop.Stopped(t)
            if t > 0 and budget_reached(spent, last_s, budget):  # a resumed run already at its budget
                break
            t0 = time.time()
            stats = trainer.generation(t, bar)
            bar.write(describe(t, stats, time.time() - t0))
            done = last = t + 1
            last_s = training_seconds(stats)
            spent += last_s
            if done < total and budget_reached(spent, last_s, budget):
                bar.write(f"[esopt] run.budget_seconds={budget:g} reached after {done} of {total} updates "
                          f"({spent:.0f}s of training; the next would take about {last_s:.0f}s)")
                break
            if done < total:
                if checkpoint is not None and checkpoint_every and done % checkpoint_every == 0:
                    checkpoint(done)
                if (every and done % every == 0) or spent >= mark:
                    evals[done] = trainer.evaluate(done, boundary=False)
            mark = next_mark(spent, every_s) if spent >= mark else mark
    finally:
        bar.close()
        trainer.log = log
    if checkpoint is not None:
        checkpoint(last)
    evals[last] = trainer.evaluate(last, boundary=True)
    return trainer.finish(evals)


def turn_progress(bar, prefix: str, total: int):
    """A rollout's on_turn that shows `prefix`, the turn and the episodes done of `total` on the bar; None without one."""
    if bar is None:
        return None

    def progress(turn, done, played=0):
        bar.set_postfix_str(f"{prefix} turn {turn} episodes {done}/{total}", refresh=False)

    return progress
