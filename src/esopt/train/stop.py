"""Stopping a run safely. The first Ctrl-C (SIGINT) or SIGTERM asks the training loop to stop at
its next safe point (after the update in progress is recorded); a second Ctrl-C stops at once,
which loses only the update in progress (the history and checkpoints are written atomically).
Either way the run ends with one line: what was kept and the exact resume command."""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

_requested = threading.Event()


_phases: list[str] = []  # what is under way that a stop ends at once (an evaluation), innermost last


class Stopped(Exception):
    """The run stopped on request; the message says what was kept and how to resume (exit code 130)."""


class StoppedDuring(Stopped):
    """A stop ended a phase that is not recorded until it is over (an evaluation): the resume plays it again."""

    def __init__(self, phase: str):
        super().__init__(phase)
        self.phase = phase


def requested() -> bool:
    return _requested.is_set()


@contextmanager
def phase(what: str):
    """Within the block, a stop asked for ends `what` at once (the block's code checks requested() and raises
    StoppedDuring(what)); the stop's line names it."""
    _phases.append(what)
    try:
        yield
    finally:
        _phases.pop()


@contextmanager
def stop_on_signals(log=print):
    """Within the block, SIGINT and SIGTERM ask for a stop at the next safe point; a second SIGINT
    raises KeyboardInterrupt at once. Outside the main thread nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _requested.clear()

    def ask(signum, frame):
        if _requested.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        _requested.set()
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        what = (f"{_phases[-1]} now (it is not recorded: a resume plays it again)" if _phases
                else "after the update in progress is recorded")
        log(f"[esopt] {name}: stopping {what} (Ctrl-C again to stop now)")

    old = {s: signal.signal(s, ask) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        _requested.clear()
