"""What crosses between the parent and a sandbox worker process: limits, results, frames.

Plain data and the wire format only, no V8 and no Django, so both sides import it: the
parent (a Celery task process, or the embedded platform's pool manager) and the jailed
worker (``tools_app.jail``) that runs V8.

A frame is a 4-byte big-endian length, then that many bytes of UTF-8 JSON. The parent
reads what a worker writes as hostile input: frames are capped and every field is checked
before it is used.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

MAX_FRAME_BYTES = 16 * 1024 * 1024
_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """A frame that is too long or not a JSON object: the other side is broken or hostile."""


@dataclass(frozen=True)
class SandboxLimits:
    """What one handler call may use. The parent enforces time, CPU and fetches; the V8 heap
    and result/console sizes are enforced inside the worker, its memory by the kernel."""

    wall_time_s: float = 30.0
    cpu_time_s: float = 10.0
    heap_bytes: int = 64 * 1024 * 1024
    """The V8 heap limit; also the budget for array buffers, which live outside it."""
    max_fetches: int = 50
    max_concurrent_fetches: int = 6
    """More fetches than this wait for a free slot."""
    max_request_bytes: int = 1024 * 1024
    """The body of one fetch request."""
    max_result_bytes: int = 64 * 1024
    max_console_bytes: int = 16 * 1024

    def __post_init__(self) -> None:
        for name, limit in vars(self).items():
            if not limit > 0:
                raise ValueError(f"SandboxLimits.{name} must be positive, got {limit!r}")

    def engine_config(self) -> dict[str, int]:
        """The part of the limits that the V8 context itself is built with."""
        return {
            "heapBytes": self.heap_bytes,
            "maxResultBytes": self.max_result_bytes,
            "maxConsoleBytes": self.max_console_bytes,
            "maxRequestBytes": self.max_request_bytes,
        }


@dataclass(frozen=True)
class SandboxResult:
    ok: bool
    result_json: str | None
    """The handler's return value as JSON (``undefined`` becomes ``null``). When it is
    longer than ``max_result_bytes`` it is replaced by ``{"truncated": true, "preview": …}``,
    itself within the limit, and ``truncated`` is set."""
    error: str | None
    """Short and meant for the model: ``TypeError: x is not a function``,
    ``timed out after 30 s``, ``memory limit exceeded``, ..."""
    timed_out: bool
    console: str
    """What the handler logged, up to ``max_console_bytes`` (then a marker line)."""
    fetch_count: int
    """Requests handed to the egress proxy (refused ones are not counted)."""
    truncated: bool
    cpu_ms: float = 0.0
    """CPU time the worker process spent on this call, as the parent measured it."""

    @classmethod
    def failure(
        cls,
        error: str,
        *,
        console: str = "",
        fetch_count: int = 0,
        timed_out: bool = False,
        cpu_ms: float = 0.0,
    ) -> SandboxResult:
        return cls(
            ok=False,
            result_json=None,
            error=error,
            timed_out=timed_out,
            console=console,
            fetch_count=fetch_count,
            truncated=False,
            cpu_ms=cpu_ms,
        )


def encode_frame(message: dict[str, Any]) -> bytes:
    data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(data)} bytes is over the limit")
    return _HEADER.pack(len(data)) + data


def frame_length(header: bytes) -> int:
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {length} bytes is over the limit")
    return int(length)


def decode_frame(data: bytes) -> dict[str, Any]:
    try:
        message = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise FrameError("frame is not JSON") from None
    if not isinstance(message, dict):
        raise FrameError("frame is not a JSON object")
    return message


HEADER_BYTES = _HEADER.size


def is_header_pair(pair: Any) -> bool:
    return isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)


def is_fetch_request(request: Any) -> bool:
    """``{"url", "method", "headers": [[name, value], ...], "body": str | None}``."""
    return (
        isinstance(request, dict)
        and isinstance(request.get("url"), str)
        and isinstance(request.get("method"), str)
        and isinstance(request.get("headers"), list)
        and all(is_header_pair(pair) for pair in request["headers"])
        and (request.get("body") is None or isinstance(request["body"], str))
    )
