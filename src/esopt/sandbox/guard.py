"""The child's Python-level guard: an audit hook that refuses, and remembers, what the kernel layers
(seccomp, Landlock) refuse anyway, so an evaluation that tried something forbidden fails with an
exact reason even when the candidate catches the error. The hook is a reporter, not the wall: code
that slips past it (or tampers with it) still meets the kernel's refusal. Plus the mapping from an
exception to a short failure reason."""
from __future__ import annotations

import errno
import os

from esopt.sandbox.seccomp import BLOCKED

HEURISTIC_FILE = "<heuristic>"

EVENTS = {
    **dict.fromkeys(["os.system", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn",
                     "subprocess.Popen", "pty.spawn", "os.startfile"], "process creation"),
    **dict.fromkeys(["socket.__new__", "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
                     "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "urllib.Request",
                     "http.client.connect", "ftplib.connect", "smtplib.connect"], "network"),
    # string_at / wstring_at read raw memory (string_at(0) would be a segfault, not a reason)
    **dict.fromkeys(["ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata",
                     "ctypes.call_function", "ctypes.addressof", "ctypes.string_at", "ctypes.wstring_at"], "ctypes"),
    **dict.fromkeys(["resource.setrlimit", "resource.prlimit"], "changing resource limits"),
    **dict.fromkeys(["os.mkfifo", "os.mknod"], "file write outside the working directory"),
}
# path-taking events: which positional arguments are write targets
WRITE_EVENTS = {"os.remove": (0,), "os.rename": (0, 1), "os.mkdir": (0,), "os.rmdir": (0,), "os.link": (0, 1),
                "os.symlink": (1,), "os.chmod": (0,), "os.chown": (0,), "os.truncate": (0,), "os.utime": (0,),
                "os.chflags": (0,), "os.setxattr": (0,), "os.removexattr": (0,), "shutil.rmtree": (0,),
                "shutil.copyfile": (1,), "shutil.copymode": (1,), "shutil.copystat": (1,), "shutil.move": (1,)}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
ALLOWED_WRITES = ("/dev/null",)


class Guard:
    def __init__(self, cwd: str, own_pid: int):
        self.cwd = os.path.realpath(cwd)
        self.pid = own_pid
        self.blocked: str | None = None  # the first refused kind, sticky

    def install(self) -> None:
        import sys

        sys.addaudithook(self.hook)

    def refuse(self, what: str):
        if self.blocked is None:
            self.blocked = what
        raise PermissionError(errno.EPERM, f"blocked by the sandbox: {what}")

    def hook(self, event: str, args) -> None:
        what = EVENTS.get(event)
        if what is not None:
            self.refuse(what)
        if event == "open":
            path, _mode, flags = args
            if isinstance(flags, int) and flags & WRITE_FLAGS and self.outside(path):
                self.refuse("file write outside the working directory")
        elif event in WRITE_EVENTS:
            for i in WRITE_EVENTS[event]:
                if i < len(args) and self.outside(args[i]):
                    self.refuse("file write outside the working directory")
        elif event in ("os.kill", "os.killpg"):
            if args[0] not in (self.pid, 0, -self.pid):
                self.refuse("signal to another process")

    def outside(self, path) -> bool:
        if isinstance(path, int) or path is None:
            return False  # an fd: the kernel layer decides
        try:
            p = os.fsdecode(os.fspath(path))
            real = os.path.realpath(os.path.join(self.cwd, p))
        except Exception:
            return True
        if real in ALLOWED_WRITES:
            return False
        return not (real == self.cwd or real.startswith(self.cwd + os.sep))


def _chain(exc, depth: int = 8):
    seen = set()
    while exc is not None and depth and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
        depth -= 1


def exception_reason(exc: BaseException, limits: dict) -> str:
    """A short, specific reason for an exception that ended the candidate's run."""
    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno in BLOCKED:
            return f"blocked: {BLOCKED[e.errno]}"
        if isinstance(e, MemoryError):
            return f"memory limit ({limits['memory_mb']:g} MB)"
        if isinstance(e, RuntimeError) and "can't start new thread" in str(e):
            return "blocked: thread creation"
        if isinstance(e, OSError) and e.errno == errno.EFBIG:
            return f"file size limit ({limits['file_mb']:g} MB)"
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            return f"disk limit ({limits['disk_mb']:g} MB)"
        if isinstance(e, OSError) and e.errno == errno.EMFILE:
            return "open file limit"
    msg = " ".join(str(exc).split())
    if len(msg) > 200:
        msg = msg[:197] + "..."
    line = next((n for n in map(_heuristic_line, _chain(exc)) if n), None)
    where = f" (line {line})" if line else ""
    if type(exc).__name__ == "HeuristicError" and msg:
        # a driver's verdict (esopt.ahd.problems.checks): the heuristic raised (it has a cause), or it
        # returned something the driver cannot use
        return f"crash: {msg}{where}" if exc.__cause__ is not None else f"invalid output: {msg}{where}"
    return f"crash: {type(exc).__name__}: {msg}{where}" if msg else f"crash: {type(exc).__name__}{where}"


def _heuristic_line(exc: BaseException) -> int | None:
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == HEURISTIC_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
