"""The outer loop every trainer shares: held-out evaluation at the start,
one update per iteration with a progress bar and a log line, periodic
checkpoints and evaluations, the final evaluation, then the run's summary."""
from __future__ import annotations

import time
from typing import Callable


def train_loop(trainer, start: int, total: int, bar, describe: Callable[[int, dict, float], str],
               checkpoint: Callable[[int], None] | None = None, checkpoint_every: int = 0) -> dict:
    """Run trainer.generation(t, bar) for t in [start, total); returns trainer.finish(evals).

    describe(t, stats, seconds) is the log line of one update; checkpoint(done) is
    called every `checkpoint_every` updates and after the last one.
    """
    every = trainer.cfg.eval.every
    evals = {}
    if start == 0 and trainer.cfg.eval.at_start:
        evals[0] = trainer.evaluate(0, boundary=True)
    try:
        for t in range(start, total):
            t0 = time.time()
            stats = trainer.generation(t, bar)
            bar.write(describe(t, stats, time.time() - t0))
            done = t + 1
            if done < total:
                if checkpoint is not None and checkpoint_every and done % checkpoint_every == 0:
                    checkpoint(done)
                if every and done % every == 0:
                    evals[done] = trainer.evaluate(done, boundary=False)
    finally:
        bar.close()
    if checkpoint is not None:
        checkpoint(total)
    evals[total] = trainer.evaluate(total, boundary=True)
    return trainer.finish(evals)
