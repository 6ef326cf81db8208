"""A time limit on a call of the user's code (an env's reset, step or close; a reward function runs inside
step), so that a call that never returns fails its episode instead of hanging the run (run.call_timeout_s).

The limit is a SIGALRM timer in the main thread: the call runs where it always did (an env holding a
thread-bound resource, a sqlite connection or a browser, keeps working) and, past the limit, CallTimeout is
raised inside it. CallTimeout is a BaseException, so a user's ``except Exception`` cannot swallow it. A call in
C code that never returns to the interpreter is not interrupted (nothing in-process can do that); outside
the main thread (a Ray worker's actor thread) or with no limit, the call runs unlimited.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


class CallTimeout(BaseException):
    """A call of the user's code ran past its time limit."""


@contextmanager
def time_limit(seconds: float | None, what: str):
    """Within the block, CallTimeout is raised once ``seconds`` have passed (none: no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def overrun(signum, frame):
        raise CallTimeout(f"{what} took longer than {seconds:g} s (run.call_timeout_s) and was stopped")

    old = signal.signal(signal.SIGALRM, overrun)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
