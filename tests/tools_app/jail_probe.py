"""Started the way the pool starts a sandbox worker (``python -I -S``, empty environment),
hardened by the jail's own ``harden``, then tries every way out and prints, as JSON,
what was refused. Run by tests/tools_app/test_isolation.py."""

from __future__ import annotations

import sys

sys.path[:0] = sys.argv[1].split(":")

import json  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402

from tests.escape_attempts import (  # noqa: E402
    attempt,
    attempts,
    change_a_neighbour,
    fork_and_wait,
    signal_a_neighbour,
)
from tools_app.jail import harden  # noqa: E402

PARENT = os.getppid()
protections = harden(int(sys.argv[2]), warm_up=lambda: None)

attempt("socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
attempt("unix_socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
attempt("open_for_reading", lambda: open("/etc/hostname", "rb").close())
attempt("open_for_writing", lambda: open("/tmp/escaped-from-the-sandbox", "wb").close())
attempt("read_parent_environment", lambda: open(f"/proc/{PARENT}/environ", "rb").read())
attempt("fork", fork_and_wait)
attempt("signal_parent", lambda: os.kill(PARENT, 0))
attempt("signal_a_neighbour", lambda: signal_a_neighbour(int(sys.argv[3])))
attempt("change_a_neighbour", lambda: change_a_neighbour(int(sys.argv[3])))
attempt("exec", lambda: os.execv("/bin/true", ["true"]))
print(json.dumps({"protections": protections, "attempts": attempts, "environ": dict(os.environ)}))
