"""The sandbox child locks itself down in steps: namespaces (network, IPC, mount with a size-capped
tmpfs as its working directory), resource limits, no_new_privs, Landlock, seccomp. Each step
reports what it achieved; `REQUIRED` names the protections without which candidates are refused
(unless the caller allows weaker containment)."""
from __future__ import annotations

import ctypes
import math
import os
import resource
import sys
import sysconfig

from esopt.sandbox import landlock, seccomp

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x08000000, 0x10000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
PR_SET_PDEATHSIG = 1

# protection -> what a missing one means (the one line of the refusal)
REQUIRED = {
    "rlimits": "resource limits could not be set",
    "no_new_privs": "PR_SET_NO_NEW_PRIVS refused",
    "seccomp": "no seccomp filter (process creation, sockets and signals would be open)",
    "landlock": "no Landlock (writes outside the working directory would be open)",
}


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when its parent dies; exit now if the parent is already gone."""
    _libc().prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(70)


def namespaces() -> dict:
    """Own network, IPC and mount namespaces: directly as root, inside a new user namespace otherwise.
    Returns {"network_namespace": bool, "mount_namespace": bool, "user_namespace": bool}."""
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    base = CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWNS
    for flags, user in ((base, False), (base | CLONE_NEWUSER, True)):
        if libc.unshare(flags) == 0:
            if user:  # keep our own uid/gid visible inside (files we create still belong to us outside)
                _write("/proc/self/setgroups", "deny")
                _write("/proc/self/uid_map", f"{uid} {uid} 1")
                _write("/proc/self/gid_map", f"{gid} {gid} 1")
            return {"network_namespace": True, "mount_namespace": True, "user_namespace": user}
    # a kernel or container that refuses the combination may still give a network namespace alone
    for flags, user in ((CLONE_NEWNET, False), (CLONE_NEWNET | CLONE_NEWUSER, True)):
        if libc.unshare(flags) == 0:
            return {"network_namespace": True, "mount_namespace": False, "user_namespace": user}
    return {"network_namespace": False, "mount_namespace": False, "user_namespace": False}


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError:
        pass


def private_tmpfs(cwd: str, size_mb: int) -> bool:
    """Mount a size-capped tmpfs on the working directory (in our own mount namespace) and enter it:
    the candidate's files live in memory, cannot exceed size_mb, and vanish with the process."""
    libc = _libc()
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return False
    opts = f"size={int(size_mb)}m,nr_inodes=1024,mode=0700".encode()
    if libc.mount(b"tmpfs", cwd.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) != 0:
        return False
    os.chdir(cwd)  # the old cwd is the directory underneath the mount
    return True


def set_rlimits(limits: dict) -> None:
    """CPU time (counted from now: startup time is not the candidate's), address space, file size,
    open files, no processes, no core files, no message queues. Raises OSError/ValueError on refusal."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = math.ceil(used.ru_utime + used.ru_stime + float(limits["cpu_s"]))
    mem = int(float(limits["memory_mb"]) * 1024 * 1024)
    fsize = int(float(limits["file_mb"]) * 1024 * 1024)
    for res, soft, hard in (
        (resource.RLIMIT_CPU, cpu, cpu + 1),  # soft: SIGXCPU; hard: SIGKILL if SIGXCPU is ignored
        (resource.RLIMIT_AS, mem, mem),
        (resource.RLIMIT_FSIZE, fsize, fsize),
        (resource.RLIMIT_NOFILE, 64, 64),
        (resource.RLIMIT_NPROC, 0, 0),  # not enforced for root: seccomp is what holds there
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_MSGQUEUE, 0, 0),
    ):
        resource.setrlimit(res, (soft, hard))


def address_space_mb() -> float:
    """This process's address space now (VmSize), in MB; 0 if /proc cannot tell."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def no_new_privs() -> bool:
    return _libc().prctl(seccomp.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0


def read_paths(extra=()) -> list[str]:
    """Where the interpreter, its standard library and our packages live (read-only for the candidate),
    plus system libraries that extension modules load. Never '/' itself."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *extra,
             *(p for p in sysconfig.get_paths().values()),
             *(p for p in sys.path if p and os.path.isdir(p)),
             "/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/share/zoneinfo",
             "/etc/ld.so.cache", "/etc/localtime", "/dev/urandom", "/dev/zero"}
    out = []
    for p in paths:
        real = os.path.realpath(p)
        if real != "/" and os.path.exists(real):
            out.append(real)
    return sorted(set(out))


def isolate(limits: dict, *, want_tmpfs: bool) -> dict:
    """Namespaces and the tmpfs working directory: first thing, while the process is surely single-threaded
    (a user namespace needs that). Returns the protections achieved."""
    prot: dict = {"process_group": True, "root": os.geteuid() == 0}
    ns = namespaces()
    prot.update(ns)
    prot["disk_quota"] = f"tmpfs {int(limits['disk_mb'])} MB" if (
        want_tmpfs and ns["mount_namespace"] and private_tmpfs(os.getcwd(), limits["disk_mb"])) else False
    return prot


def restrict(prot: dict, limits: dict) -> dict:
    """Everything after the imports, in place on prot; returns failures: {missing protection: why}.
    Landlock and seccomp need no_new_privs first; seccomp goes last (it forbids what the steps before use)."""
    failures: dict = {}
    try:
        set_rlimits(limits)
        prot["rlimits"] = "cpu, address space, file size, open files, processes, core"
    except (OSError, ValueError) as e:
        prot["rlimits"] = False
        failures["rlimits"] = f"{REQUIRED['rlimits']}: {e}"
    prot["no_new_privs"] = no_new_privs()
    if not prot["no_new_privs"]:
        failures["no_new_privs"] = REQUIRED["no_new_privs"]
    try:
        prot["landlock"] = landlock.restrict([os.getcwd()], read_paths(), rw_files=["/dev/null"])
    except OSError as e:
        prot["landlock"] = False
        failures["landlock"] = f"{REQUIRED['landlock']}: {e}"
    try:
        prot["seccomp"] = seccomp.install(os.getpid())
    except OSError as e:
        prot["seccomp"] = False
        failures["seccomp"] = f"{REQUIRED['seccomp']}: {e}"
    return failures
