"""Cheaper call-site stacks for Playwright's API calls, while esopt's browser env runs.

Playwright 1.44 (the version browsergym-core pins) takes ``inspect.stack()`` on every API
call, every sync dispatch and every routed request, even when the task already carries one
(``getattr(task, "__pw_stack__", inspect.stack())`` evaluates its default first).
``inspect.stack()`` reads each frame's source file and stats its path: about 0.18 s of a
MiniWoB++ reset of ~1 s here (cProfile, docs/results/browser.md "Browser episodes"). Playwright
uses only each frame's file name, line, code name and locals (to name the API call in its
protocol metadata), none of which needs the source.

``fast_stacks()`` gives Playwright's modules, for the duration of the block, an ``inspect``
whose ``stack()`` builds the same FrameInfo list from the frame objects alone; every other
attribute is the real module's. Outside the block (BrowserGym's own env, run reports'
browsers) Playwright is untouched. What Playwright derives from either stack is the same
(tests/envs/test_pw_stack.py).
"""
from __future__ import annotations

import contextlib
import inspect
import sys
import types

_MODULES = ("playwright._impl._connection", "playwright._impl._sync_base", "playwright._impl._network")


def frame_stack(context: int = 1) -> list[inspect.FrameInfo]:
    """inspect.stack() without source lines: (frame, filename, lineno, function, None, None) per
    frame, from the caller outwards. ``context`` is accepted and ignored."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        frames.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name, None, None))
        frame = frame.f_back
    return frames


class _Inspect(types.ModuleType):
    """The inspect module with stack() replaced."""

    stack = staticmethod(frame_stack)

    def __getattr__(self, name):
        return getattr(inspect, name)


_SHIM = _Inspect("inspect")


@contextlib.contextmanager
def fast_stacks():
    """Within the block, Playwright's modules that take stacks use frame_stack (re-entrant)."""
    swapped = []
    for name in _MODULES:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "inspect", None) is inspect:
            module.inspect = _SHIM
            swapped.append(module)
    try:
        yield
    finally:
        for module in swapped:
            module.inspect = inspect
