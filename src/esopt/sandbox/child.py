"""The sandbox child: `python -I -S -B -c BOOT SRC RESULT_FD PARENT_PID` (see sandbox.py). It reads one JSON
request on stdin, imports numpy and the problem's driver, locks itself down (lockdown.py), then
compiles and runs the candidate's code and the driver on each instance, and writes one JSON line to
RESULT_FD. The first line is written before any candidate code runs: {"ready": true}, or instead of it
{"refused": ...} (a required protection is missing), {"limit_error": ...} or {"probe": {...}}. After
"ready", one line {"ok": true, "outputs": [...]} or {"ok": false, "reason": "..."}; the candidate can
write to that pipe too, so the parent trusts only the first line and re-checks everything after it."""
from __future__ import annotations

import importlib
import json
import os
import sys

from esopt.sandbox import guard, lockdown

# small, pure modules a heuristic commonly imports, loaded before the lockdown so they cost nothing later
PRELOAD = ("numpy", "math", "random", "heapq", "itertools", "collections", "functools", "bisect", "operator")
IDENT = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789"


def main() -> None:
    result_fd, parent_pid = int(sys.argv[2]), int(sys.argv[3])
    try:
        lockdown.die_with_parent(parent_pid)
        request = json.loads(sys.stdin.buffer.read())
        result = serve(request, result_fd)
    except MemoryError:
        result = {"ok": False, "reason": "memory limit"}
    except BaseException as e:  # the child's own failure: report it, never hang
        result = {"ok": False, "reason": f"sandbox error: {type(e).__name__}: {e}"[:300]}
    _write_result(result_fd, result)


def _write_result(fd: int, result: dict) -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass
    try:
        data = _encode(result)
    except BaseException as e:
        data = _encode({"ok": False, "reason": _encode_failure(e)})
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError:
        pass
    os._exit(0)


def _encode(obj) -> bytes:
    return (json.dumps(obj, default=_jsonable, separators=(",", ":")) + "\n").encode()


def _encode_failure(e: BaseException) -> str:
    if isinstance(e, RecursionError):
        return "invalid result: nested too deeply"
    if isinstance(e, MemoryError):
        return "invalid result: too large"
    return f"invalid result: {str(e)[:150]}"


def _jsonable(x):
    """numpy scalars and arrays become plain numbers and lists; anything else is not JSON-able."""
    import numpy as np

    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"output contains a {type(x).__name__}, which is not JSON-able")


def _load_driver(spec: str):
    mod, _, fn = str(spec).partition(":")
    if not fn or not all(part and set(part) <= set(IDENT) for part in [*mod.split("."), fn]):
        raise ValueError(f"driver {spec!r} is not 'package.module:function'")
    return getattr(importlib.import_module(mod), fn)


def serve(request: dict, result_fd: int) -> dict:
    limits = request["limits"]
    prot = lockdown.isolate(limits, want_tmpfs=bool(request.get("tmpfs", True)))
    for name in PRELOAD:
        importlib.import_module(name)
    driver = None if request.get("probe") else _load_driver(request["driver"])
    floor = lockdown.address_space_mb() + 16
    if float(limits["memory_mb"]) < floor:
        return {"limit_error": f"Limits.memory_mb={limits['memory_mb']:g} is below what the child uses before any "
                               f"candidate code runs; give at least {floor:.0f} (Python, numpy and the driver)"}
    failures = lockdown.restrict(prot, limits)
    cwd = os.getcwd()
    if request.get("probe"):
        from esopt.sandbox.probe import self_check

        return {"probe": {"protections": prot, "failures": failures, "checks": self_check(cwd)}}
    if failures and not request.get("allow_weaker"):
        return {"refused": "; ".join(failures.values())}
    # The first line on the result pipe is ours, written before any candidate code runs: a refusal
    # (above) or this. Whatever follows may be the candidate's doing and is treated as such.
    os.write(result_fd, _encode({"ready": True}))
    g = guard.Guard(cwd, os.getpid())
    if request.get("audit", True):
        g.install()
    result = run(request["code"], request["entry"], driver, request["instances"], limits)
    if g.blocked is not None:
        return {"ok": False, "reason": f"blocked: {g.blocked}"}
    return result


def run(code: str, entry: str, driver, instances: list, limits: dict) -> dict:
    try:
        compiled = compile(code, guard.HEURISTIC_FILE, "exec")
    except SyntaxError as e:
        return {"ok": False, "reason": f"syntax error: {e.msg} (line {e.lineno})"}
    except (ValueError, TypeError) as e:
        return {"ok": False, "reason": f"syntax error: {e}"}
    except MemoryError:
        return {"ok": False, "reason": f"memory limit ({limits['memory_mb']:g} MB)"}
    namespace = {"__name__": "heuristic", "__builtins__": __builtins__}
    reserve = bytearray(1 << 20)  # freed on failure, so that naming it has room even after a memory bomb
    try:
        exec(compiled, namespace)
        fn = namespace.get(entry)
        if not callable(fn):
            found = "" if fn is None else f" ({type(fn).__name__}, not a function)"
            return {"ok": False, "reason": f"no function {entry}{found}"}
        return {"ok": True, "outputs": [driver(fn, instance) for instance in instances]}
    except BaseException as e:  # SystemExit and KeyboardInterrupt included: the candidate ends nothing
        del reserve
        reason = guard.exception_reason(e, limits)
    namespace.clear()
    return {"ok": False, "reason": reason}


if __name__ == "__main__":
    main()
