"""Ways out of a confined child process, tried one by one by the probes
(tests/tools_app/jail_probe.py, tests/knowledge_app/parser_probe.py): each ``attempt``
records "allowed" or "refused: errno N". Imported before the probe is confined (a confined
process may not open the file)."""

from __future__ import annotations

import os
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
