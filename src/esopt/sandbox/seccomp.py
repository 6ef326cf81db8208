"""A seccomp-BPF filter for the sandbox child, written as raw BPF (no libseccomp needed).

The filter is a deny list: ordinary computation (memory, files under Landlock's rules, time,
randomness) runs untouched; creating processes or threads, executing programs, sockets, signals
to other processes, changing resource limits, tracing, namespaces, mounts, kernel keys, io_uring,
persistent IPC objects and the administrative calls a root process could misuse all fail with
a marker errno, so the child can tell which kind of thing was refused. A call from another ABI
(i386 or x32 on x86_64) kills the process.

Syscall numbers come from libseccomp's resolver when libseccomp.so.2 is present (any
architecture), otherwise from the built-in x86_64 table; `tests/ahd/test_sandbox.py` checks
the two agree.
"""
from __future__ import annotations

import ctypes
import os
import struct

# Marker errnos (the kernel passes any value up to 4095 through; glibc calls them "Unknown
# error N"). One per kind of refusal, so the child can name the reason.
BLOCKED = {
    4001: "process creation",
    4002: "network",
    4003: "signal to another process",
    4004: "changing resource limits",
    4005: "privileged system call",
}
E_PROCESS, E_NETWORK, E_SIGNAL, E_RLIMIT, E_PRIVILEGED = BLOCKED

# name -> errno marker
DENY = {
    **dict.fromkeys(["fork", "vfork", "clone", "clone3", "execve", "execveat"], E_PROCESS),
    **dict.fromkeys(["socket", "socketpair"], E_NETWORK),
    **dict.fromkeys(["pidfd_open", "pidfd_send_signal", "pidfd_getfd"], E_SIGNAL),
    "setrlimit": E_RLIMIT,
    **dict.fromkeys([
        "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "unshare", "setns", "mount", "umount2",
        "pivot_root", "chroot", "swapon", "swapoff", "reboot", "sethostname", "setdomainname", "iopl",
        "ioperm", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "acct",
        "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "syslog", "quotactl", "quotactl_fd",
        "open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "personality", "vhangup", "bpf",
        "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "io_uring_setup",
        "io_uring_enter", "io_uring_register", "fanotify_init", "open_tree", "move_mount", "fsopen",
        "fsconfig", "fsmount", "fspick", "mount_setattr", "mknod", "mknodat", "setuid", "setgid",
        "setreuid", "setregid", "setgroups", "setresuid", "setresgid", "setfsuid", "setfsgid", "capset",
        "setpriority", "sched_setscheduler", "sched_setparam", "sched_setattr", "ioprio_set",
        "migrate_pages", "move_pages", "process_madvise", "mq_open", "shmget", "semget", "msgget", "uselib",
        "truncate",  # by path: Landlock covers it only from ABI 3 (ftruncate on an open file stays allowed)
    ], E_PRIVILEGED),
}
# signals: allowed only to the process itself (its own pid, or 0 / -pid: its own process group,
# which holds nothing else because the child is a session leader that cannot fork)
SIGNAL_PID_ARG0 = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
# ioctl requests that reach other processes or the terminal: TIOCSTI, TIOCLINUX, FIOSETOWN, SIOCSPGRP
IOCTL_DENY = (0x5412, 0x541C, 0x8901, 0x8902)
FCNTL_DENY = (8, 15)  # F_SETOWN, F_SETOWN_EX: SIGIO/SIGURG to a chosen process

X86_64 = {
    "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59, "execveat": 322, "socket": 41,
    "socketpair": 53, "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438, "setrlimit": 160,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "unshare": 272,
    "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "swapon": 167,
    "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320,
    "acct": 163, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
    "syslog": 103, "quotactl": 179, "quotactl_fd": 443, "open_by_handle_at": 304, "name_to_handle_at": 303,
    "lookup_dcookie": 212, "personality": 135, "vhangup": 153, "bpf": 321, "perf_event_open": 298,
    "userfaultfd": 323, "keyctl": 250, "add_key": 248, "request_key": 249, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "fanotify_init": 300, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "mknod": 133, "mknodat": 259, "setuid": 105, "setgid": 106, "setreuid": 113, "setregid": 114,
    "setgroups": 116, "setresuid": 117, "setresgid": 119, "setfsuid": 122, "setfsgid": 123, "capset": 126,
    "setpriority": 141, "sched_setscheduler": 144, "sched_setparam": 142, "sched_setattr": 314,
    "ioprio_set": 251, "migrate_pages": 256, "move_pages": 279, "process_madvise": 440, "mq_open": 240,
    "shmget": 29, "semget": 64, "msgget": 68, "uselib": 134, "truncate": 76,
    "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
    "prlimit64": 302, "ioctl": 16, "fcntl": 72,
}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_BIT = 0x40000000

# BPF opcodes and seccomp constants
LD_ABS_W, JEQ, JGE, RET = 0x20, 0x15, 0x35, 0x06
RET_ALLOW, RET_KILL_PROCESS, RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
OFF_NR, OFF_ARCH = 0, 4
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def arg_lo(i: int) -> int:
    return 16 + 8 * i  # seccomp_data.args[i], low 32 bits (little-endian)


def arg_hi(i: int) -> int:
    return 20 + 8 * i


def _resolver():
    try:
        lib = ctypes.CDLL("libseccomp.so.2")  # by soname: ctypes.util.find_library would pull in subprocess
    except OSError:
        return None
    fn = lib.seccomp_syscall_resolve_name
    fn.argtypes, fn.restype = [ctypes.c_char_p], ctypes.c_int
    return fn


def syscall_numbers(names) -> tuple[dict[str, int], str]:
    """{name: number} for the running architecture (names absent on it are left out), and the source."""
    resolve = _resolver()
    if resolve is not None:
        out = {n: resolve(n.encode()) for n in names}
        if os.uname().machine == "x86_64":  # an older libseccomp may not know the newest calls
            out = {n: X86_64[n] if nr == -1 and n in X86_64 else nr for n, nr in out.items()}
        return {n: nr for n, nr in out.items() if nr >= 0}, "libseccomp"
    if os.uname().machine == "x86_64":
        return {n: X86_64[n] for n in names if n in X86_64}, "built-in table"
    raise OSError(f"no syscall table for {os.uname().machine} and no libseccomp.so.2")


def build(own_pid: int) -> tuple[list[tuple[int, int, int, int]], str]:
    """The filter program as (code, jt, jf, k) tuples, and where its syscall numbers came from."""
    machine = os.uname().machine
    if machine not in AUDIT_ARCH:
        raise OSError(f"seccomp filter not written for architecture {machine}")
    names = [*DENY, *SIGNAL_PID_ARG0, "prlimit64", "ioctl", "fcntl"]
    nrs, source = syscall_numbers(names)
    if not all(n in nrs for n in ("clone", "execve", "socket", "kill", "tgkill", "prlimit64", "ioctl")):
        raise OSError(f"syscall numbers incomplete ({source})")
    prog = [(LD_ABS_W, 0, 0, OFF_ARCH), (JEQ, 1, 0, AUDIT_ARCH[machine]), (RET, 0, 0, RET_KILL_PROCESS),
            (LD_ABS_W, 0, 0, OFF_NR)]
    if machine == "x86_64":
        prog += [(JGE, 0, 1, X32_BIT), (RET, 0, 0, RET_KILL_PROCESS)]
    for name, err in DENY.items():
        if name in nrs:
            prog += [(JEQ, 0, 1, nrs[name]), (RET, 0, 0, RET_ERRNO | err)]
    for name in SIGNAL_PID_ARG0:
        if name not in nrs:
            continue
        own = [own_pid] if name in ("tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo") else \
            [own_pid, 0, (-own_pid) & 0xFFFFFFFF]
        prog += _allow_if_arg_in(nrs[name], 0, own, E_SIGNAL)
    prog += _deny_if_arg_in(nrs["ioctl"], 1, IOCTL_DENY, E_PRIVILEGED)
    prog += _deny_if_arg_in(nrs["fcntl"], 1, FCNTL_DENY, E_SIGNAL)
    # prlimit64(pid, resource, new_limit, old_limit): reading is fine, setting is not
    prog += [(JEQ, 0, 6, nrs["prlimit64"]), (LD_ABS_W, 0, 0, arg_lo(2)), (JEQ, 0, 3, 0),
             (LD_ABS_W, 0, 0, arg_hi(2)), (JEQ, 0, 1, 0), (RET, 0, 0, RET_ALLOW), (RET, 0, 0, RET_ERRNO | E_RLIMIT)]
    prog.append((RET, 0, 0, RET_ALLOW))
    return prog, source


def _allow_if_arg_in(nr: int, arg: int, values, err: int):
    """if nr: allow when the low word of args[arg] is one of values, else fail with err (ends in a return)."""
    body = [(LD_ABS_W, 0, 0, arg_lo(arg))]
    n = len(values)
    for i, v in enumerate(values):
        body.append((JEQ, n - i, 0, v))  # true: jump over the remaining compares and the deny
    body += [(RET, 0, 0, RET_ERRNO | err), (RET, 0, 0, RET_ALLOW)]
    return [(JEQ, 0, len(body), nr), *body]


def _deny_if_arg_in(nr: int, arg: int, values, err: int):
    body = [(LD_ABS_W, 0, 0, arg_lo(arg))]
    n = len(values)
    for i, v in enumerate(values):
        body.append((JEQ, n - i, 0, v))  # true: jump to the deny
    body += [(RET, 0, 0, RET_ALLOW), (RET, 0, 0, RET_ERRNO | err)]
    return [(JEQ, 0, len(body), nr), *body]


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter))]


def install(own_pid: int) -> str:
    """Install the filter on the calling (single-threaded) process; needs no_new_privs set first.
    Returns a short description; raises OSError when the kernel refuses."""
    prog, source = build(own_pid)
    if len(prog) > 4096:
        raise OSError("seccomp program too long")
    arr = (_Filter * len(prog))(*[_Filter(*ins) for ins in prog])
    fprog = _Prog(len(prog), arr)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp filter refused: errno {err}")
    return f"seccomp-bpf, {len(prog)} instructions, numbers from {source}"


def pack(prog) -> bytes:
    """The program as the kernel reads it (for tests and inspection)."""
    return b"".join(struct.pack("<HBBI", *ins) for ins in prog)
