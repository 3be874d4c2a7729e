"""A document's text, read by a child process with limits the kernel enforces.

Parsers are large and meet hostile files: a PDF of a million pages, a stream that
inflates to gigabytes, a DOCX zip bomb, an HTML file nested a million deep. The worker
(``parse_worker``) checks what it can (pages, unpacked size, text length) and refuses in
words; what it cannot foresee meets the fences here: an address-space limit, a CPU-time
limit and a wall-clock timeout, no file writes; and the worker itself gives up the network,
new processes and writable files before it parses (``parse_worker.confine``). Whatever
breaks, the document gets one of our sentences.
"""

from __future__ import annotations

import json
import logging
import resource
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

WORKER = "knowledge_app.parse_worker"
logger = logging.getLogger(__name__)
_warned = False


class ParseRefused(Exception):
    """The message is ours, fit for the dashboard."""


@dataclass(frozen=True)
class ParseLimits:
    max_pages: int
    max_characters: int
    timeout_s: float
    memory_mb: int


def _fence(limits: ParseLimits) -> None:
    memory = limits.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = int(limits.timeout_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def extract_text(kind: str, content: bytes, limits: ParseLimits) -> str:
    """The text of ``content`` (a document of ``kind``), or ParseRefused in words."""
    answer = read_document(kind, content, limits)
    if "error" in answer:
        raise ParseRefused(f"It was refused: {answer['error']}.")
    return str(answer["text"])


def read_document(kind: str, content: bytes, limits: ParseLimits) -> dict[str, Any]:
    """The worker's answer: ``text`` or ``error`` (ours), and the ``protections`` it read
    under; ParseRefused in words when it broke a fence or gave no answer."""
    pages, characters = str(limits.max_pages), str(limits.max_characters)
    command = [sys.executable, "-E", "-s", "-B", "-m", WORKER, kind, pages, characters]
    try:
        # Our own interpreter and module, fixed arguments; the document goes in on stdin.
        finished = subprocess.run(  # noqa: S603
            command,
            input=content,
            capture_output=True,
            timeout=limits.timeout_s,
            preexec_fn=lambda: _fence(limits),
            cwd=_project_root(),  # -m finds the worker here; -E: no PYTHON* variables
            env={},  # no settings, keys or database URL in the child
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ParseRefused(
            f"Reading it took longer than {limits.timeout_s:g} s; it was stopped."
        ) from None
    if finished.returncode != 0:
        raise ParseRefused(
            "Reading it went past the memory or time allowed for one document; it was stopped."
        )
    try:
        answer: dict[str, Any] = json.loads(finished.stdout)
    except ValueError:
        raise ParseRefused("It could not be read.") from None
    _warn_once(answer.get("protections", {}))
    return answer


def _warn_once(protections: dict[str, Any]) -> None:
    global _warned
    if not protections.get("syscall_filter") and not _warned:
        _warned = True
        logger.warning("knowledge parser runs without a syscall filter (no libseccomp)")


def _project_root() -> str:
    from pathlib import Path

    return str(Path(__file__).resolve().parent.parent)
