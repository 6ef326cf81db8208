"""Run model-written heuristic code in a child process that nothing escapes (docs/sandbox.md).

The parent starts `python -I -S -B` on esopt.sandbox.child in a new session with a scrubbed environment and
a fresh, throwaway working directory, sends the request on stdin, and reads stdout, stderr and a
separate result pipe without blocking and with byte caps. It enforces the wall time, reaps the
child with its resource usage, kills anything left in the child's session, and removes the
directory. The child locks itself down (namespaces, rlimits, no_new_privs, Landlock, seccomp,
audit hook) before the candidate's code is even compiled. Nothing the child sends is trusted.
"""
from __future__ import annotations

import functools
import json
import math
import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

BOOT = "import os, sys; sys.path[:0] = sys.argv[1].split(os.pathsep); from esopt.sandbox.child import main; main()"
TAIL_CHARS = 2000


class SandboxUnavailable(RuntimeError):
    """A protection the sandbox promises cannot be applied on this machine (and weaker containment
    was not allowed): no candidate is run."""


@dataclass(frozen=True)
class Limits:
    cpu_s: float = 10  # CPU seconds for the candidate (rounded up to whole seconds by the kernel)
    wall_s: float = 20  # wall-clock seconds for the whole evaluation, startup included
    memory_mb: int = 1024  # address space of the whole child (Python and numpy included)
    file_mb: int = 1  # largest file the candidate may write
    output_kb: int = 256  # stdout + stderr bytes before the child is killed
    result_mb: int = 8  # the JSON result's size
    disk_mb: int = 16  # size of the tmpfs working directory (where a mount namespace is available)
    allow_weaker: bool = False  # run even if a promised protection is unavailable (docs/sandbox.md)

    def __post_init__(self):
        for name in ("cpu_s", "wall_s", "memory_mb", "file_mb", "output_kb", "result_mb", "disk_mb"):
            v = getattr(self, name)
            ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
            if not ok or not (v >= 0 if name == "file_mb" else v > 0):
                what = "a finite number >= 0" if name == "file_mb" else "a positive finite number"
                raise ValueError(f"Limits.{name} must be {what}, got {v!r}")


@dataclass
class Outcome:
    ok: bool
    outputs: list | None
    reason: str | None
    wall_s: float
    cpu_s: float | None
    stdout_tail: str


def run_candidate(code: str, entry: str, driver: str, instances: list[dict], limits: Limits = Limits()) -> Outcome:
    """Run `code` (which must define `entry`) through `driver` ("module:function", run(fn, instance) ->
    raw output) on each instance in a locked-down child. ok=True with one raw output per instance, or
    ok=False with a short reason. Raises SandboxUnavailable (one line) if the machine cannot give the
    promised protections and limits.allow_weaker is False; never raises for anything the code does."""
    if not isinstance(code, str) or not isinstance(entry, str) or not entry.isidentifier():
        raise ValueError(f"run_candidate needs code as str and entry as a Python name, got entry {entry!r}")
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"sandbox: needs Linux (seccomp, Landlock, namespaces), not {sys.platform}; "
                                 "refusing to run candidate code")
    request = {"code": code, "entry": entry, "driver": driver, "instances": list(instances)}
    return _execute(request, limits)


def protections() -> dict[str, bool | str]:
    """Which protections apply on this machine, as verified by a locked-down probe child: each
    namespace, the rlimits, no_new_privs, Landlock (ABI), seccomp, and the system-call-level checks
    (process creation, sockets, signals to the parent, writes/reads outside, frozen rlimits, threads).
    'refusal' holds the one line run_candidate would raise with, or '' when candidates can run."""
    global _PROBED
    if _PROBED is None:
        found = _probe()
        if "probe_failed" in found:
            return found  # not remembered: a passing problem (an overloaded machine) may clear
        _PROBED = found
    return dict(_PROBED)


_PROBED: dict | None = None


def _probe() -> dict[str, bool | str]:
    outcome, probe = _spawn({"probe": True}, Limits(allow_weaker=True))
    if probe is None or not isinstance(probe.get("probe"), dict):
        return {"available": False, "probe_failed": True, "refusal": f"sandbox probe failed: {outcome.reason}"}
    p = probe["probe"]
    out: dict[str, bool | str] = {}
    for section in ("protections", "checks"):
        for k, v in (p.get(section) or {}).items():
            out[str(k)] = v if isinstance(v, (bool, str)) else str(v)
    failures = p.get("failures") or {}
    out["refusal"] = "; ".join(str(v) for v in failures.values())
    out["available"] = not failures
    return out


def _execute(request: dict, limits: Limits, *, audit: bool = True, tmpfs: bool = True) -> Outcome:
    request = {**request, "audit": audit, "tmpfs": tmpfs}
    outcome, result = _spawn(request, limits)
    if result is None:
        return outcome
    if isinstance(result.get("limit_error"), str):
        raise ValueError(_clean(result["limit_error"], 300))
    if "refused" in result:
        raise SandboxUnavailable(
            f"sandbox: {_clean(result['refused'], 400)}; refusing to run candidate code "
            "(Limits(allow_weaker=True) runs it with weaker containment, see docs/sandbox.md)")
    return _judge(outcome, result, len(request["instances"]))


def _judge(outcome: Outcome, result: dict, n: int) -> Outcome:
    """Turn the child's (untrusted) result into the outcome."""
    ok = result.get("ok")
    if ok is True:
        outputs = result.get("outputs")
        if not isinstance(outputs, list) or len(outputs) != n:
            return _fail(outcome, "invalid result: wrong number of outputs")
        outcome.ok, outcome.outputs, outcome.reason = True, outputs, None
        return outcome
    if ok is False and isinstance(result.get("reason"), str):
        return _fail(outcome, _clean(result["reason"], 300) or "crash")
    return _fail(outcome, "invalid result: malformed")


def _fail(outcome: Outcome, reason: str) -> Outcome:
    outcome.ok, outcome.outputs, outcome.reason = False, None, reason
    return outcome


def _clean(text: str, n: int) -> str:
    text = "".join(ch if ch.isprintable() else " " for ch in str(text))
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _child_env(cwd: str) -> dict[str, str]:
    threads = "1"
    return {"PATH": "/usr/bin:/bin", "HOME": cwd, "TMPDIR": cwd, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
            "NUMEXPR_NUM_THREADS": threads, "VECLIB_MAXIMUM_THREADS": threads, "NUMBA_NUM_THREADS": threads}


@functools.cache
def _import_roots() -> tuple[str, ...]:
    """Where the child finds esopt and numpy (it runs with -I -S: no site-packages of its own)."""
    import numpy

    roots = [str(Path(__file__).resolve().parents[2]), str(Path(numpy.__file__).resolve().parents[1])]
    return tuple(dict.fromkeys(roots))


def _spawn(request: dict, limits: Limits) -> tuple[Outcome, dict | None]:
    """Start the child, feed it, watch it, reap it, clean up. Returns (outcome with wall/cpu/tail and
    a failure reason if the parent saw one, parsed result dict or None)."""
    request = {**request, "limits": asdict(limits), "allow_weaker": limits.allow_weaker}
    try:
        payload = json.dumps(request, allow_nan=False).encode()
    except (TypeError, ValueError) as e:
        raise ValueError(f"run_candidate: instances must be plain JSON data (dict/list/str/number): {e}") from None
    cwd = tempfile.mkdtemp(prefix="esopt-sandbox-")
    start = time.monotonic()
    deadline = start + limits.wall_s
    proc = None
    io = _Streams(limits)
    reason, status, cpu = None, None, None
    try:
        rfd, wfd = os.pipe()
        io.fds.append(rfd)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", "-c", BOOT, os.pathsep.join(_import_roots()), str(wfd),
                 str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(wfd,),
                cwd=cwd, env=_child_env(cwd), start_new_session=True, close_fds=True)
        except OSError as e:
            return Outcome(False, None, f"sandbox error: could not start the child: {e}", 0.0, None, ""), None
        finally:
            os.close(wfd)
        reason = io.pump(proc, rfd, payload, deadline)
        if reason is None and not _await_exit(proc.pid, deadline):
            reason = f"timeout (wall {limits.wall_s:g} s)"
    finally:
        if proc is not None:
            _kill(proc.pid)  # a no-op for a zombie; the zombie keeps its pid (and session id) reserved
            _await_exit(proc.pid, None)
            _kill_session(proc.pid)
            status, cpu = _reap(proc.pid)
            proc.returncode = status
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                try:
                    stream.close()
                except OSError:
                    pass
        io.close()
        _rmtree(cwd)
    wall = time.monotonic() - start
    outcome = Outcome(False, None, reason, wall, cpu, io.tail())
    if reason is not None:
        return outcome, None
    sig_reason = _status_reason(status, cpu, limits)
    result = io.result()
    if sig_reason is not None or result is None or isinstance(result, str):
        outcome.reason = sig_reason or result or "crash: exited without a result"
        return outcome, None
    return outcome, result


def _parse(data: bytes) -> dict | str:
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError, MemoryError):
        return "invalid result: not JSON"
    return obj if isinstance(obj, dict) else "invalid result: malformed"


def _await_exit(pid: int, deadline: float | None) -> bool:
    """Wait (without reaping) until the child has exited; False if it has not by the deadline."""
    pause = 0.0002
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | (0 if deadline is None else os.WNOHANG)):
                return True
        except ChildProcessError:
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.005)


def _reap(pid: int) -> tuple[int, float | None]:
    """(returncode as Popen spells it, CPU seconds of the child)."""
    try:
        _, status, usage = os.wait4(pid, 0)
    except ChildProcessError:
        return -signal.SIGKILL, None
    return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime


def _status_reason(status: int | None, cpu: float | None, limits: Limits) -> str | None:
    if status is None or status == 0:
        return None
    if status < 0:
        sig = -status
        cpu_limit = f"cpu limit ({limits.cpu_s:g} s)"
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu is not None and cpu >= limits.cpu_s):
            return cpu_limit
        if sig == signal.SIGSYS:
            return "blocked: forbidden system call"
        if sig == signal.SIGXFSZ:
            return f"file size limit ({limits.file_mb:g} MB)"
        try:
            return f"crash: killed by {signal.Signals(sig).name}"
        except ValueError:
            return f"crash: killed by signal {sig}"
    return f"crash: exit status {status}"


class _Streams:
    """Non-blocking I/O with the child: write the request, read stdout/stderr (capped together) and the
    result pipe (capped on its own). Memory held is bounded by the caps."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.out_cap = int(limits.output_kb * 1024)
        self.res_cap = int(limits.result_mb * 1024 * 1024)
        self.out = bytearray()
        self.out_total = 0
        self.res = bytearray()
        self.fds: list[int] = []

    def pump(self, proc, rfd: int, payload: bytes, deadline: float) -> str | None:
        """Run until every pipe is closed (the child is done) or a limit is hit; returns the reason
        for a parent-side failure, or None."""
        sel = selectors.DefaultSelector()
        reading = {proc.stdout.fileno(): "out", proc.stderr.fileno(): "out", rfd: "res"}
        for fd in reading:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        win = proc.stdin.fileno()
        os.set_blocking(win, False)
        sel.register(win, selectors.EVENT_WRITE)
        sent = 0
        try:
            while reading:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return f"timeout (wall {self.limits.wall_s:g} s)"
                for key, _ in sel.select(remaining):
                    fd = key.fd
                    if fd == win:
                        try:
                            sent += os.write(win, payload[sent: sent + (1 << 16)])
                        except BlockingIOError:
                            continue
                        except OSError:
                            sent = len(payload)
                        if sent >= len(payload):
                            sel.unregister(win)
                            proc.stdin.close()
                        continue
                    try:
                        data = os.read(fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if not data:
                        sel.unregister(fd)
                        del reading[fd]
                        continue
                    if reading[fd] == "out":
                        self.out_total += len(data)
                        self.out += data
                        if len(self.out) > 2 * TAIL_CHARS:
                            del self.out[: len(self.out) - TAIL_CHARS]
                        if self.out_total > self.out_cap:
                            return f"output limit ({self.limits.output_kb:g} KB)"
                    else:
                        self.res += data
                        if len(self.res) > self.res_cap:
                            return f"invalid result: over {self.limits.result_mb:g} MB"
            return None
        finally:
            sel.close()

    def tail(self) -> str:
        """The last output, control characters (terminal escapes) replaced: it ends up in logs and reports."""
        text = bytes(self.out[-TAIL_CHARS:]).decode("utf-8", "replace")
        return "".join(c if c.isprintable() or c in "\n\t" else "\ufffd" for c in text)

    def result(self) -> dict | str | None:
        """The child's message: a dict, a failure reason, or None when the candidate ran and sent nothing.
        The first line comes from the child before any candidate code runs (a refusal, a probe report, or
        "ready"); only after "ready" may the candidate have written, so what follows it can never speak
        for the sandbox (refusals there are ignored)."""
        if not self.res:
            return None
        head, _, rest = bytes(self.res).partition(b"\n")
        control = _parse(head)
        if not isinstance(control, dict) or control.get("ready") is not True:
            return control
        if not rest.strip():
            return None
        result = _parse(rest)
        if isinstance(result, dict):
            for key in ("refused", "limit_error", "probe"):
                result.pop(key, None)
        return result

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []


def _kill(pid: int) -> None:
    for fn in (os.killpg, os.kill):
        try:
            fn(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_session(sid: int) -> list[int]:
    """SIGKILL every process still in the child's session (none when seccomp holds; the backstop when
    weaker containment let the candidate fork). Returns the pids found."""
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            text = Path(f"/proc/{name}/stat").read_text()
            fields = text[text.rindex(")") + 2:].split()
            if int(fields[3]) == sid and int(name) != sid:  # the child itself is a zombie awaiting wait4
                found.append(int(name))
                os.kill(int(name), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            continue
    try:
        os.killpg(sid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return found


def _rmtree(path: str) -> None:
    def fix(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), stat.S_IRWXU)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, stat.S_IRWXU)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=fix)
