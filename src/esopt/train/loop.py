"""The outer loop every trainer shares: held-out evaluation at the start,
one update per iteration with a progress bar and a log line, periodic
checkpoints and evaluations, the final evaluation, then the run's summary.

run.budget_seconds stops training at equal wall-clock instead of equal updates:
after the first update at which the run's training seconds (the time_* figures
of its updates, evaluations excluded; those of earlier processes counted on a
resume) reach the budget, the run ends as if that update were its last (final
checkpoint and evaluation, summary). Schedules keep their configured length."""
from __future__ import annotations

import time
from typing import Callable

from . import stop


def training_seconds(stats: dict) -> float:
    """Seconds of one update: the sum of its time_* figures (what `esopt bench` reports as training time)."""
    return float(sum(v for k, v in stats.items() if k.startswith("time_") and isinstance(v, (int, float))))


def spent_before(run, start: int) -> float:
    """Training seconds of the updates before `start` recorded in the run's metrics (a resumed run)."""
    if not start:
        return 0.0
    return sum(training_seconds(m) for m in run.metrics() if m.get("kind") == "train" and m.get("generation", 0) < start)


def train_loop(trainer, start: int, total: int, bar, describe: Callable[[int, dict, float], str],
               checkpoint: Callable[[int], None] | None = None, checkpoint_every: int = 0) -> dict:
    """Run trainer.generation(t, bar) for t in [start, total) (fewer under run.budget_seconds);
    returns trainer.finish(evals), whose last key is the number of updates made. A stop asked for
    (train/stop.py) ends the loop before an update with stop.Stopped(updates done).

    describe(t, stats, seconds) is the log line of one update; checkpoint(done) is
    called every `checkpoint_every` updates and after the last one.
    """
    every = trainer.cfg.eval.every
    budget = trainer.cfg.run.budget_seconds
    spent = spent_before(trainer.run, start) if budget is not None else 0.0
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
            if budget is not None and spent >= budget:
                break
            t0 = time.time()
            stats = trainer.generation(t, bar)
            bar.write(describe(t, stats, time.time() - t0))
            done = last = t + 1
            spent += training_seconds(stats)
            if budget is not None and spent >= budget and done < total:
                bar.write(f"[esopt] run.budget_seconds={budget:g} reached after {done} of {total} updates "
                          f"({spent:.0f}s of training)")
                break
            if done < total:
                if checkpoint is not None and checkpoint_every and done % checkpoint_every == 0:
                    checkpoint(done)
                if every and done % every == 0:
                    evals[done] = trainer.evaluate(done, boundary=False)
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
