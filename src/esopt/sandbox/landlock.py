"""Landlock (Linux >= 5.13) for the sandbox child: writes only inside its working directory, reads
only where Python and its libraries live, and (ABI >= 6) no signals or abstract unix sockets
outside the sandbox. Landlock binds root as well as ordinary users; it needs no_new_privs (or
CAP_SYS_ADMIN) and a kernel built with it. Plain ctypes syscalls: no library needed."""
from __future__ import annotations

import ctypes
import os

# syscall numbers are the same on every architecture (asm-generic, 444-446)
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the only rights a file (not dir) rule may hold


def fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: bits 0-12
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is absent or disabled."""
    libc = _libc()
    v = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                     ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(int(v), 0)


def restrict(write_dirs, read_paths, rw_files=()) -> str:
    """Restrict the calling process for good: full file rights (bar executing, device nodes and device
    ioctls) beneath each of write_dirs, read-only access beneath each of read_paths, read+write on
    rw_files (e.g. /dev/null); everything else denied. Paths that do not exist are skipped.
    Returns a short description; raises OSError if the kernel has no Landlock or refuses."""
    abi = abi_version()
    if abi < 1:
        raise OSError("Landlock not available (kernel without it, or disabled at boot)")
    libc = _libc()
    handled = fs_rights(abi)
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    fd = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    fd = int(fd)
    try:
        write = handled & ~(EXECUTE | MAKE_CHAR | MAKE_BLOCK | IOCTL_DEV)
        read = READ_FILE | READ_DIR
        for paths, rights in ((write_dirs, write), (read_paths, read), (rw_files, READ_FILE | WRITE_FILE)):
            for path in paths:
                _add_rule(libc, fd, path, rights)
        if libc.syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(fd)
    return f"landlock abi {abi}"


def _add_rule(libc, ruleset_fd: int, path: str, rights: int) -> None:
    try:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = _PathBeneath(rights, pfd)
        if libc.syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(ruleset_fd), ctypes.c_int(RULE_PATH_BENEATH),
                        ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(pfd)
