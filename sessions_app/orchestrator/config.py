"""What a session is given (its config and tools) and what it reports per turn."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

Mode = Literal["voice", "text"]
_PLACEHOLDER_NAME = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def _object_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@dataclass(kw_only=True)
class ToolDefinition:
    """A tool ready to use: ``parameters`` is already JSON Schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=_object_schema)
    handler: str | None = None  # JavaScript source of a server tool
    client: bool = False
    timeout_s: float | None = None  # None: the session's client_tool_timeout
    pinned: bool = False


@dataclass(kw_only=True)
class SessionConfig:
    session_id: str
    resume_token: str
    workspace_id: int
    llm_name: str
    instructions: str = ""
    greeting: str | None = None
    voice: str | None = None
    mode: Mode = "voice"
    variables: dict[str, str] = field(default_factory=dict)
    tools: list[ToolDefinition] = field(default_factory=list)
    model: str | None = None
    max_tool_steps: int = 5  # LLM rounds per turn
    tts_sample_rate: int = 24_000
    client_tool_timeout: float = 10.0


@dataclass
class TurnMetrics:
    """Monotonic timestamps (seconds) of one turn; ``None`` where it never got there."""

    turn_id: int
    source: Literal["speech", "text"]
    input_at: float  # final transcript or text received
    llm_request_at: float | None = None
    first_llm_text_at: float | None = None
    first_tts_request_at: float | None = None
    first_audio_at: float | None = None
    end_at: float | None = None
    outcome: Literal["completed", "cancelled", "failed"] = "completed"
    llm_rounds: int = 0
    tool_calls: int = 0

    @staticmethod
    def _ms(start: float | None, end: float | None) -> float | None:
        return None if start is None or end is None else (end - start) * 1000

    @property
    def input_to_llm_ms(self) -> float | None:
        return self._ms(self.input_at, self.llm_request_at)

    @property
    def llm_text_to_tts_ms(self) -> float | None:
        return self._ms(self.first_llm_text_at, self.first_tts_request_at)

    @property
    def input_to_first_audio_ms(self) -> float | None:
        return self._ms(self.input_at, self.first_audio_at)


def render_template(template: str, variables: dict[str, str]) -> str:
    """Fill ``{{name}}`` placeholders; unknown names become empty."""
    return _PLACEHOLDER_NAME.sub(lambda match: variables.get(match[1], ""), template)
