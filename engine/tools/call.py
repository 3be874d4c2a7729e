"""One tool call, from the LLM's call to the result it gets back: ``ToolRequest`` and
``ToolResult``, for every tool kind, and the one ``ToolStatus``.

They stay these types inside a process; ``to_wire`` / ``from_wire`` are for the process
boundaries only (a Celery task's arguments, a channel-layer message back to the session).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from engine.protocol import ToolStatus

__all__ = ["ToolRequest", "ToolResult", "ToolStatus"]


@dataclass(frozen=True)
class ToolRequest:
    """A call the LLM made, its arguments parsed and checked against the tool's schema.

    ``kind`` names the ``ToolRunner`` class that runs it (``engine.tools.kinds``); the
    last three fields are the sandbox's (a server tool's JavaScript source and trust).
    """

    call_id: str
    workspace_id: int
    name: str
    arguments: dict[str, Any]
    timeout_s: float
    session_id: str = ""
    kind: str = "sandbox"
    # Where a kind finds the tool, when its name is not enough (an MCP tool: its server
    # connection and its name there).
    source: str = ""
    handler: str = ""  # JavaScript source
    pinned: bool = False  # handler source hash was saved with the agent
    reads_secrets: bool = False  # pinned by an owner or admin: readable secrets are values

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ToolRequest:
        known = {field.name for field in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

    def with_timeout(self, timeout_s: float) -> ToolRequest:
        return replace(self, timeout_s=timeout_s)


UNREADABLE = "the sandbox sent an unreadable outcome"


@dataclass(frozen=True)
class ToolResult:
    status: ToolStatus
    result: str | None = None  # JSON text given to the LLM
    error: str | None = None  # human-readable error given to the LLM
    log: str | None = None  # the handler's console output, for the session record only
    cpu_ms: float = 0.0  # CPU the sandbox spent on the call
    # Set by a runner that masked the result where the secrets are (the sandbox's parent):
    # the call's arguments as JSON text, masked the same way. The record then stores
    # result, error, log and these as they are, without decrypting anything.
    masked_arguments: str | None = None
    # Added to the turn's ``chat`` steps after "Using <tool>": where the answer came from
    # (a knowledge search's passages, "Source K3: …").
    steps: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", ToolStatus(self.status))

    def to_wire(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status.value, "steps": list(self.steps)}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ToolResult:
        """Never raises: what another process sent may be anything."""
        try:
            status = ToolStatus(str(data.get("status")))
        except ValueError:
            status = ToolStatus.STARTED
        if not status.final:
            return cls(ToolStatus.FAILED, error=UNREADABLE)
        cpu_ms = data.get("cpu_ms")
        return cls(
            status=status,
            result=_text(data.get("result")),
            error=_text(data.get("error")),
            log=_text(data.get("log")) or None,
            cpu_ms=float(cpu_ms) if isinstance(cpu_ms, int | float) else 0.0,
            masked_arguments=_text(data.get("masked_arguments")),
            steps=_texts(data.get("steps")),
        )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _texts(value: Any) -> tuple[str, ...]:
    return tuple(item for item in value if isinstance(item, str)) if isinstance(value, list) else ()
