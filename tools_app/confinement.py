"""What closes the way out of a child process that reads or runs a stranger's input: the
sandbox worker (``tools_app.jail``, V8) and the knowledge parser (``knowledge_app.
parse_worker``, PDF/DOCX/HTML). Linux only; nothing here imports Django, so a child imports
it in a fraction of a second.

- ``die_with_parent``: SIGKILL when the parent goes away;
- ``leave_network``: an empty network namespace of its own (root only);
- ``drop_privileges``: from root to nobody, not dumpable (its memory and /proc files are
  closed to other processes of its user);
- ``filter_syscalls``: a seccomp filter (libseccomp): no sockets, no new processes or
  programs, no signals to other processes (``kill``, and ``tgkill`` and its kin naming
  another process: every confined child runs as the same user, nobody), no change to
  another process (its limits, priority, CPUs), no ptrace, no changes to the system; and
  no file opened at all, or (``read_only_files``) only for reading, nothing created,
  written, renamed or removed.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal

NOBODY = 65534
CLONE_NEWNET = 0x40000000
CLONE_THREAD = 0x00010000
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
_NETWORK_AND_PROCESSES = (
    # networking
    # (sending on the event loop's self-pipe, made before the filter, stays allowed)
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    # new processes and programs
    "fork", "vfork", "execve", "execveat",
    # other processes
    "kill", "tkill", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open",
    "pidfd_getfd", "pidfd_send_signal",
)  # fmt: skip
# Signals that name their target process: allowed to this process only (the C library's
# raise and pthread_kill send tgkill to our own pid). Every sandbox worker and knowledge
# parser runs as nobody: without this, one could kill another's (another tenant's) work.
_SIGNALS_BY_PROCESS = ("tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
# Calls that change another process of the same user (a neighbour's CPU limit set to 0
# kills it; its priority or CPUs slow it): allowed on this process only, named 0. Each
# (call, argument, the only value allowed): setpriority and ioprio_set also say whose
# (PRIO_PROCESS 0, IOPRIO_WHO_PROCESS 1; the user's, with who 0, is every nobody's).
_CHANGES_BY_PROCESS = (
    ("prlimit64", 0, 0), ("setpriority", 0, 0), ("setpriority", 1, 0),
    ("sched_setaffinity", 0, 0), ("sched_setscheduler", 0, 0), ("sched_setparam", 0, 0),
    ("sched_setattr", 0, 0), ("ioprio_set", 0, 1), ("ioprio_set", 1, 0),
)  # fmt: skip
_OPENING = ("open", "openat", "openat2", "open_by_handle_at")
_FILE_CHANGES = (
    "creat", "name_to_handle_at",
    "mkdir", "mkdirat", "mknod", "mknodat", "unlink", "unlinkat", "rmdir", "rename",
    "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod",
    "fchmodat", "chown", "fchown", "fchownat", "lchown", "truncate", "ftruncate",
    "memfd_create", "memfd_secret",
)  # fmt: skip
_SYSTEM = (
    "mount", "umount2", "pivot_root", "chroot", "setns", "unshare", "setuid", "setgid",
    "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "bpf", "perf_event_open",
    "userfaultfd", "io_uring_setup", "keyctl", "add_key", "request_key", "personality",
    "reboot", "kexec_load", "init_module", "finit_module", "delete_module", "swapon",
    "swapoff", "sethostname", "setdomainname", "acct", "quotactl",
)  # fmt: skip


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def leave_network() -> bool:
    """An empty network namespace of our own (root only; seccomp covers the rest)."""
    status: int = _libc().unshare(CLONE_NEWNET)
    return status == 0


def drop_privileges(parent: int) -> int:
    """From root to nobody: an escape then owns nothing and can signal nothing."""
    if os.getuid() == 0:
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        except OSError:
            pass
    libc = _libc()
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    die_with_parent(parent)  # a change of user clears the parent-death signal: set it again
    return os.getuid()


def die_with_parent(parent: int) -> None:
    """SIGKILL when the parent goes away, and at once if it already has."""
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def filter_syscalls(read_only_files: bool = False) -> bool:
    """Install the seccomp filter. False where the host cannot (no libseccomp)."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError):
        return False
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    denied = seccomp.ERRNO(errno.EPERM)
    refused = _NETWORK_AND_PROCESSES + _FILE_CHANGES + _SYSTEM
    for name in refused if read_only_files else refused + _OPENING:
        try:
            rules.add_rule(denied, name)
        except (OSError, ValueError, RuntimeError):
            pass  # a syscall this kernel or architecture does not have
    if read_only_files:  # opened for reading only: never to write, create or truncate
        for name, flags in (("open", 1), ("openat", 2)):
            for mask, value in (
                (os.O_ACCMODE, os.O_WRONLY),
                (os.O_ACCMODE, os.O_RDWR),
                (os.O_CREAT, os.O_CREAT),
                (os.O_TRUNC, os.O_TRUNC),
            ):
                rules.add_rule(denied, name, seccomp.Arg(flags, seccomp.MASKED_EQ, mask, value))
        for name in ("openat2", "open_by_handle_at"):  # flags out of reach: the C library
            rules.add_rule(seccomp.ERRNO(errno.ENOSYS), name)  # falls back to openat
    for name in _SIGNALS_BY_PROCESS:
        rules.add_rule(denied, name, seccomp.Arg(0, seccomp.NE, os.getpid()))
    for name, argument, allowed in _CHANGES_BY_PROCESS:
        rules.add_rule(denied, name, seccomp.Arg(argument, seccomp.NE, allowed))
    # Threads yes (V8 needs them), processes no: clone without CLONE_THREAD is refused;
    # clone3 says "not implemented" so that the C library falls back to clone.
    rules.add_rule(denied, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    rules.load()
    return True
