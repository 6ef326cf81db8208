"""Self-checks the locked-down child runs in probe mode: each tries a forbidden thing at the system-call
level (through libc, no audit hook in the way) and reports whether the kernel refused it. Used by
sandbox.protections() so run records state what was verified, not what was merely attempted."""
from __future__ import annotations

import ctypes
import os
import resource
import secrets


def self_check(cwd: str) -> dict[str, bool]:
    libc = ctypes.CDLL(None, use_errno=True)
    checks = {}
    pid = libc.fork()
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
    checks["process_creation_blocked"] = pid < 0
    fd = libc.socket(2, 1, 0)  # AF_INET, SOCK_STREAM
    if fd >= 0:
        os.close(fd)
    checks["socket_blocked"] = fd < 0
    checks["signal_to_parent_blocked"] = libc.kill(os.getppid(), 0) != 0
    outside = os.path.join(os.path.dirname(cwd), f"esopt-probe-{secrets.token_hex(8)}")
    try:
        os.close(os.open(outside, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.unlink(outside)
        checks["write_outside_blocked"] = False
    except OSError:
        checks["write_outside_blocked"] = True
    try:
        os.listdir("/etc")
        checks["read_outside_blocked"] = False
    except OSError:
        checks["read_outside_blocked"] = True
    try:
        with open(os.path.join(cwd, "probe.txt"), "w") as f:
            f.write("ok")
        checks["write_inside_allowed"] = True
    except OSError:
        checks["write_inside_allowed"] = False
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        checks["rlimits_frozen"] = False
    except (OSError, ValueError):
        checks["rlimits_frozen"] = True
    import threading

    try:
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
        checks["threads_blocked"] = False
    except RuntimeError:
        checks["threads_blocked"] = True
    return checks
