"""What a session consumed, counted where it happens and handed out as deltas.

Plain counters, no I/O. The session adds to them on paths it walks anyway (the end of an
LLM round, audio pushed to the recogniser, text sent to the TTS and the audio it served,
tool calls); whoever records usage takes what accumulated since its last take: after each
turn (the turn's figures) and when the session ends or moves.

Audio is counted in bytes and CPU in fractional milliseconds; a take hands out whole
milliseconds of the running totals, so the takes of a session always add up to its total.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.protocol import camel_name
from engine.providers.base import ToolCall, ToolSpec

# OpenAI's rule of thumb for English text: about four characters to a token. Used only
# when a provider reports no usage, and such requests are counted as estimated.
CHARS_PER_TOKEN = 4

# The figures, in the order every report lists them (wire, API, CSV, webhooks).
USAGE_FIELDS = (
    "llm_requests",
    "prompt_tokens",
    "completion_tokens",
    "estimated_llm_requests",
    "stt_audio_ms",
    "tts_characters",
    "tts_audio_ms",
    "server_tool_calls",
    "tool_cpu_ms",
    "client_tool_calls",
)


def empty_usage() -> dict[str, int]:
    return dict.fromkeys(USAGE_FIELDS, 0)


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass
class UsageMeter:
    stt_sample_rate: int = 16_000
    tts_sample_rate: int = 24_000
    llm_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated_llm_requests: int = 0
    stt_audio_bytes: int = 0
    tts_characters: int = 0
    tts_audio_bytes: int = 0
    server_tool_calls: int = 0
    tool_cpu_ms: float = 0.0
    client_tool_calls: int = 0

    def __post_init__(self) -> None:
        self._taken = empty_usage()

    def llm_round(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: Sequence[ToolSpec],
        text: str,
        calls: Sequence[ToolCall],
        reported: dict[str, int] | None,
    ) -> None:
        """One LLM request that got an answer: the provider's figures, else an estimate."""
        self.llm_requests += 1
        reported = reported or {}
        prompt, completion = reported.get("prompt_tokens"), reported.get("completion_tokens")
        if prompt is not None and completion is not None:
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            return
        self.estimated_llm_requests += 1
        asked = json.dumps(messages, ensure_ascii=False) + json.dumps(
            [[t.name, t.description, t.parameters] for t in tools], ensure_ascii=False
        )
        written = text + "".join(call.name + call.arguments for call in calls)
        self.prompt_tokens += estimate_tokens(asked)
        self.completion_tokens += estimate_tokens(written)

    def totals(self) -> dict[str, int]:
        """Everything so far, in whole units."""
        return {
            "llm_requests": self.llm_requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "estimated_llm_requests": self.estimated_llm_requests,
            "stt_audio_ms": self.stt_audio_bytes * 1000 // (2 * self.stt_sample_rate),
            "tts_characters": self.tts_characters,
            "tts_audio_ms": self.tts_audio_bytes * 1000 // (2 * self.tts_sample_rate),
            "server_tool_calls": self.server_tool_calls,
            "tool_cpu_ms": round(self.tool_cpu_ms),
            "client_tool_calls": self.client_tool_calls,
        }

    def take(self) -> dict[str, int]:
        """What accumulated since the last take."""
        totals = self.totals()
        delta = {name: totals[name] - self._taken[name] for name in USAGE_FIELDS}
        self._taken = totals
        return delta


def wire_usage(usage: dict[str, int]) -> dict[str, int]:
    """The figures as the ``metrics`` event spells them (camelCase)."""
    return {camel_name(name): usage.get(name, 0) for name in USAGE_FIELDS}


def usage_from_wire(wire: dict[str, Any]) -> dict[str, int]:
    return {name: wire.get(camel_name(name), 0) for name in USAGE_FIELDS}
