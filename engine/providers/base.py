"""Provider interfaces: one small abstract interface per kind (STT, LLM, TTS, tools).

The orchestrator only sees these types. Adapters live one per module beside this file
and are registered by name in ``registry.py``. Retries and fallbacks belong to
``resilience``, never to vendor modules; an adapter raises ``ProviderError`` saying
whether a retry could help, and why it failed.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from engine.protocol import ErrorCode

# Why a provider failed, in a word: what metrics and session records say about a retry
# or a fallback (never the provider's own message, which may quote the request).
REASON_TIMEOUT = "timeout"
REASON_UNREACHABLE = "unreachable"  # could not connect at all
REASON_BROKEN = "connection_broken"  # the connection dropped mid-answer
REASON_RATE_LIMITED = "rate_limited"  # HTTP 429
REASON_SERVER_ERROR = "server_error"  # HTTP 5xx, or an error the provider streamed
REASON_AUTH = "auth_failed"  # HTTP 401/403: a wrong or missing key
REASON_REFUSED = "request_refused"  # another HTTP 4xx
REASON_BAD_RESPONSE = "bad_response"  # an answer that could not be read
REASON_FAILED = "failed"  # anything else
REASON_CIRCUIT_OPEN = "circuit_open"  # not asked: its circuit breaker is open (resilience)
FAILURE_REASONS = frozenset({
    REASON_TIMEOUT, REASON_UNREACHABLE, REASON_BROKEN, REASON_RATE_LIMITED, REASON_SERVER_ERROR,
    REASON_AUTH, REASON_REFUSED, REASON_BAD_RESPONSE, REASON_FAILED, REASON_CIRCUIT_OPEN,
})  # fmt: skip


def status_reason(status: int) -> str:
    """The failure reason of an HTTP error status."""
    if status == 429:
        return REASON_RATE_LIMITED
    if status in (401, 403):
        return REASON_AUTH
    if status == 408:
        return REASON_TIMEOUT
    return REASON_SERVER_ERROR if status >= 500 else REASON_REFUSED


class ProviderError(Exception):
    """A provider failed. ``code`` is the wire error code (``llm_failed``, ``stt_failed``…).

    ``retryable``: the same request may well succeed a moment later (``resilience`` retries
    it). ``reason`` is one of ``FAILURE_REASONS``.
    """

    def __init__(
        self, message: str, *, code: ErrorCode, retryable: bool = False, reason: str = REASON_FAILED
    ) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)  # a code the protocol does not know raises ValueError
        self.retryable = retryable
        self.reason = reason


@dataclass(frozen=True)
class Capabilities:
    tools: bool = False  # LLMs: function calling (a fallback without it serves no tool turn)
    # Audio providers: the rate they consume/produce (a TTS fallback must match the primary).
    sample_rate: int | None = None
    offline: bool = False  # runs without any network (embedded default)
    # TTS: the voice names it can speak (its default first); None: any name, the vendor
    # itself refuses one it does not have.
    voices: tuple[str, ...] | None = None
    # STT/TTS: the languages it hears or speaks (``languages.NAMES`` codes), and whether it
    # follows the caller's own (``detect``); an agent's language must be among them.
    languages: tuple[str, ...] = ("en",)
    detects_language: bool = False


# ---------------------------------------------------------------- LLM


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the LLM sees it: ``parameters`` is JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """One tool call requested by the LLM. ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallsRequested:
    """Emitted once per LLM round, after the stream ends, when it asked for tools."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class LLMDone:
    finish_reason: str  # stop | length | tool_calls | content_filter
    usage: dict[str, int] = field(default_factory=dict)


LLMEvent = TextDelta | ToolCallsRequested | LLMDone


class LLM(abc.ABC):
    """Chat completion with streaming and function calling.

    ``messages`` use the OpenAI chat format (dicts with role/content/tool_calls/
    tool_call_id), which every adapter we have speaks or maps from.
    """

    name: str = "llm"
    capabilities = Capabilities(tools=True)

    @abc.abstractmethod
    def stream(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[ToolSpec],
        model: str | None = None,
    ) -> AsyncIterator[LLMEvent]:
        """Yield TextDelta* then at most one ToolCallsRequested, then exactly one LLMDone."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections; default: nothing to release."""


# ---------------------------------------------------------------- STT


@dataclass(frozen=True)
class SpeechStarted:
    """The user started speaking (used for barge-in while the agent talks), or spoke again
    after a ``LikelyEndOfTurn`` (which withdraws it)."""


@dataclass(frozen=True)
class PartialTranscript:
    text: str


@dataclass(frozen=True)
class FinalTranscript:
    """End of the user's turn.

    Timestamps are ``time.monotonic()`` seconds in this process, ``None`` when unknown:
    ``speech_end_at`` when the audio holding the user's last word was pushed,
    ``endpoint_at`` when the end of the turn was decided (the provider said so, or the
    voice-activity detector heard enough silence). The session turns them into the
    end-of-utterance delay and the recogniser's final latency.
    """

    text: str
    speech_end_at: float | None = None
    endpoint_at: float | None = None


@dataclass(frozen=True)
class LikelyEndOfTurn:
    """The user has probably finished: ``text`` is what the ``FinalTranscript`` will say if
    the turn ends here (a pause the provider is still judging). Optional: a provider that
    knows the words before it decides may say so, and the session may start its reply then,
    held back (``SessionConfig.preemptive_generation``). A ``SpeechStarted`` or a
    ``PartialTranscript`` after it withdraws it; so does a final with other words."""

    text: str


STTEvent = SpeechStarted | PartialTranscript | LikelyEndOfTurn | FinalTranscript


class STTStream(abc.ABC):
    @abc.abstractmethod
    async def push_audio(self, pcm16: bytes) -> None:
        """Feed PCM16 little-endian mono at the rate the stream was opened with."""

    @abc.abstractmethod
    def events(self) -> AsyncIterator[STTEvent]:
        """Transcription events until the stream is closed."""

    @abc.abstractmethod
    async def aclose(self) -> None: ...


class STT(abc.ABC):
    name: str = "stt"
    capabilities = Capabilities()

    @abc.abstractmethod
    async def open(self, *, sample_rate: int) -> STTStream: ...

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this process cannot serve sessions with this provider (an offline model that
        failed to load), in words; None when it can. Sessions are refused, not run deaf."""
        return None


# ---------------------------------------------------------------- TTS


class TTS(abc.ABC):
    """Text to PCM16 mono audio at ``capabilities.sample_rate`` (24 kHz to the browser)."""

    name: str = "tts"
    capabilities = Capabilities(sample_rate=24000)

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this process cannot serve sessions with this provider (an offline model that
        failed to load), in words; None when it can. Sessions are refused, not run deaf."""
        return None

    @abc.abstractmethod
    def synthesize(self, text: str, *, voice: str | None = None) -> AsyncIterator[bytes]:
        """Yield PCM16 chunks as soon as they are available."""

    async def warm(self, voice: str | None = None) -> None:  # noqa: B027 - optional hook
        """Get ready to speak (a provider that streams over a socket opens it); never raises."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """The session is over: close what ``warm`` or ``synthesize`` kept open."""
