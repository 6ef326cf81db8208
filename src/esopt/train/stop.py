"""Stopping a run safely. The first Ctrl-C (SIGINT) or SIGTERM asks the training loop to stop at
its next safe point (after the update in progress is recorded); a second Ctrl-C stops at once,
which loses only the update in progress (the history and checkpoints are written atomically).
Either way the run ends with one line: what was kept and the exact resume command.

Outside training (the pre-run check, loading, `esopt eval`, the benches) every command runs under
interrupt_on_signals: Ctrl-C and SIGTERM raise Interrupted at once in the main thread, the command ends with
one line saying what was under way and what is on disk (interrupted_line, printed by errors.one_line, exit
code 130), and a second signal ends the process at once, whatever cleanup is under way."""
from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

_requested = threading.Event()


_phases: list[str] = []  # what is under way that a stop ends at once (an evaluation), innermost last


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM where no safe point is waited for: raised at once, as Python raises KeyboardInterrupt.
    phase() marks it with what was under way and what that leaves on disk (attributes phase, kept)."""

    def __init__(self, signame: str):
        super().__init__(signame)
        self.signame = signame


class Stopped(Exception):
    """The run stopped on request; the message says what was kept and how to resume (exit code 130)."""


class StoppedDuring(Stopped):
    """A stop ended a phase that is not recorded until it is over (an evaluation): the resume plays it again."""

    def __init__(self, phase: str):
        super().__init__(phase)
        self.phase = phase


def requested() -> bool:
    return _requested.is_set()


def signal_name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


@contextmanager
def on_stop_signals(handler, keep=lambda: False):
    """Within the block, SIGINT and SIGTERM call handler(signum, frame); the earlier handlers come back after it,
    unless keep() says this one stays."""
    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        if not keep():
            for s, earlier in old.items():
                signal.signal(s, earlier)


@contextmanager
def phase(what: str, kept: str | None = None):
    """Within the block, a stop asked for ends `what` at once (the block's code checks requested() and raises
    StoppedDuring(what)); the stop's line names it. An interrupt raised within it (Interrupted, KeyboardInterrupt)
    is marked with `what` and `kept` (what is on disk if it ends here), innermost first."""
    _phases.append(what)
    try:
        yield
    except KeyboardInterrupt as err:
        if getattr(err, "phase", None) is None:
            err.phase, err.kept = what, kept
        raise
    finally:
        _phases.pop()


def interrupted_line(err: BaseException) -> str:
    """The one line a command interrupted outside training's safe points ends with."""
    name = getattr(err, "signame", "Ctrl-C")
    during = f" during {err.phase}" if getattr(err, "phase", None) else ""
    return f"[esopt] stopped by {name}{during}: {getattr(err, 'kept', None) or 'the command did not finish'}"


@contextmanager
def interrupt_on_signals():
    """For a whole command (cli.main): Ctrl-C and SIGTERM raise Interrupted in the main thread wherever it is,
    also in a command started with SIGINT ignored (a script's background job) or with SIGTERM's default (which
    ends the process without a word); stop_on_signals replaces this while training. After one interrupt, a
    second signal ends the process at once (exit 130), also while the interpreter waits for threads at exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired: list[int] = []

    def interrupt(signum, frame):
        if fired:
            os.write(2, f"[esopt] {signal_name(signum)} again: ended at once\n".encode())
            os._exit(130)
        fired.append(signum)
        raise Interrupted(signal_name(signum))

    with on_stop_signals(interrupt, keep=lambda: bool(fired)):  # after an interrupt it stays: a second signal
        yield                                                      # must end the process at once


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
            raise Interrupted("Ctrl-C")
        _requested.set()
        name = signal_name(signum)
        what = (f"{_phases[-1]} now (it is not recorded: a resume plays it again)" if _phases
                else "after the update in progress is recorded")
        log(f"[esopt] {name}: stopping {what} (Ctrl-C again to stop now)")

    try:
        with on_stop_signals(ask):
            yield
    finally:
        _requested.clear()
