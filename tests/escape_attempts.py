"""Ways out of a confined child process, tried one by one by the probes
(tests/tools_app/jail_probe.py, tests/knowledge_app/parser_probe.py): each ``attempt``
records "allowed" or "refused: errno N". Imported before the probe is confined (a confined
process may not open the file)."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable

attempts: dict[str, str] = {}


def attempt(name: str, action: Callable[[], object]) -> None:
    try:
        action()
    except OSError as exc:
        attempts[name] = f"refused: errno {exc.errno}"
    else:
        attempts[name] = "allowed"


def fork_and_wait() -> None:
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)


def signal_a_neighbour(pid: int) -> None:
    """Signal 0 (a permission check, nothing delivered) to another process by the calls
    ``kill`` does not cover: ``tgkill``, ``tkill``, ``rt_sigqueueinfo``."""
    import ctypes

    import pyseccomp

    libc = ctypes.CDLL(None, use_errno=True)
    info = ctypes.create_string_buffer(128)  # a siginfo_t, zeroed: si_code 0 is refused
    info[8:12] = (-1).to_bytes(4, "little", signed=True)  # si_code SI_QUEUE
    for name, args in (
        ("tgkill", (pid, pid, 0)),
        ("tkill", (pid, 0)),
        ("rt_sigqueueinfo", (pid, 0, info)),
    ):
        number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
        if libc.syscall(number, *args) == 0:
            return  # one of them reached it
    raise OSError(ctypes.get_errno(), "refused")


def change_a_neighbour(pid: int) -> None:
    """Set another process's CPU limit to 0 (that kills it), lower its priority (or every
    process's of our user), or bind it to one CPU."""
    for change in (
        lambda: resource.prlimit(pid, resource.RLIMIT_CPU, (0, 0)),
        lambda: os.setpriority(os.PRIO_PROCESS, pid, 19),
        lambda: os.setpriority(os.PRIO_USER, 0, 19),  # every process of our user
        lambda: os.sched_setaffinity(pid, {0}),
    ):
        try:
            change()
        except OSError as refused:
            error = refused
        else:
            return  # one of them reached it
    raise error
