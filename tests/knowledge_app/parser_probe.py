"""Started the way ``knowledge_app.parsing`` starts the parser (same fences, empty
environment), confined by the parser's own ``confine``, then tries every way out a parser
bug could take and prints, as JSON, what was refused. Run by test_parser_confinement.py."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import json
import os
import socket

from knowledge_app.parse_worker import confine
from tests.escape_attempts import (
    attempt,
    attempts,
    change_a_neighbour,
    fork_and_wait,
    signal_a_neighbour,
)

PARENT = os.getppid()
protections = confine("pdf")


def connect(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


attempt("socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
attempt("unix_socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
attempt("connect_to_redis", lambda: connect(int(sys.argv[1])))
attempt("fork", fork_and_wait)
attempt("exec", lambda: os.execv("/bin/true", ["/bin/true"]))
attempt("write_a_file", lambda: open(sys.argv[2], "w").close())
attempt("append_to_a_file", lambda: open(sys.argv[3], "a").close())
attempt("read_parent_environment", lambda: open(f"/proc/{PARENT}/environ", "rb").read())
attempt("signal_parent", lambda: os.kill(PARENT, 0))
attempt("signal_a_neighbour", lambda: signal_a_neighbour(int(sys.argv[4])))
attempt("change_a_neighbour", lambda: change_a_neighbour(int(sys.argv[4])))
attempt("read_the_file", lambda: open(sys.argv[3], "rb").read(16))
print(json.dumps({"protections": protections, "attempts": attempts}))
