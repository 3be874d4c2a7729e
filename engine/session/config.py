"""What a session is given (its config and tools) and what it reports per turn."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.protocol import MetricsEvent, ToolStatus
from engine.providers.resilience import Attempts
from engine.tools.runner import BROWSER, SANDBOX

Mode = Literal["voice", "text"]
# What the agent says when the LLM's reply is empty (nothing would be heard otherwise).
DEFAULT_EMPTY_REPLY = "Sorry, I don't have an answer to that."
# What the agent says while a tool is slow to answer (``SessionConfig.tool_filler``).
DEFAULT_TOOL_FILLER = "One moment, let me check that."
DEFAULT_TOOL_FILLER_AFTER_S = 1.5
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
    timeout_s: float | None = None  # None: the session's client or server tool timeout
    pinned: bool = False
    reads_secrets: bool = False
    # Which ``ToolRunner`` runs it (``engine.tools.kinds``); "": the browser's for a
    # client tool, else the sandbox's.
    kind: str = ""
    source: str = ""  # where its kind finds it (``ToolRequest.source``)

    def __post_init__(self) -> None:
        if not self.kind:
            self.kind = BROWSER if self.client else SANDBOX


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
    audio_ready: bool = True  # False: hold the greeting's audio until the client says so
    variables: dict[str, str] = field(default_factory=dict)
    tools: list[ToolDefinition] = field(default_factory=list)
    vocabulary: list[str] = field(default_factory=list)  # recognition hints
    language: str = "en"  # the agent's (``engine.providers.languages``): "en", "es"… or "detect"
    empty_reply: str = DEFAULT_EMPTY_REPLY
    model: str | None = None
    max_tool_steps: int = 5  # LLM rounds per turn
    tts_sample_rate: int = 24_000
    client_tool_timeout: float = 10.0
    server_tool_timeout: float = 30.0  # the sandbox's wall time
    max_tool_calls_per_step: int = 8
    # Said once a round's tools have run this long and are not done (never twice in a row:
    # the agent says something else between two); None or 0: never.
    tool_filler: str = DEFAULT_TOOL_FILLER
    tool_filler_after_s: float | None = DEFAULT_TOOL_FILLER_AFTER_S
    # While the agent speaks, the user's speech interrupts it only once its transcript has
    # this many words (that are not all backchannels like "mm-hmm" or "okay"); 0: at once.
    barge_in_min_words: int = 1
    # Preemptive generation: the reply starts, held back, when the recogniser says the turn
    # has likely ended (``LikelyEndOfTurn``), and goes out at once when it really ends with
    # the same words (else it is discarded: the LLM tokens it used are still counted).
    preemptive_generation: bool = True
    # Limits (docs/limits.md): variables the page may not change (a session token's),
    # context notes kept, what one LLM request may carry, and when the session ends.
    locked_variables: dict[str, str] = field(default_factory=dict)
    page_variables: list[str] | None = None  # the only ones the page may set (None: any)
    context_notes_max: int = 20
    llm_request_max_bytes: int = 128 * 1024
    idle_timeout_s: float | None = None  # no speech, text or tool result for this long
    max_duration_s: float | None = None
    started_at: float = 0.0  # epoch seconds; what max_duration_s counts from
    # Said in `ready` ({message, setupUrl}): the workspace has no LLM, and where to add one.
    notice: dict[str, str] | None = None
    # Knowledge bases the ``knowledge`` tool kind searches (knowledge_app.session_tool), and
    # a tool the platform calls itself, through the tool seam, with the user's words before
    # each turn's first LLM request.
    knowledge_bases: list[int] = field(default_factory=list)
    prefetch_tool: str | None = None


@dataclass(frozen=True)
class ToolTiming:
    name: str
    status: ToolStatus
    ms: float
    started_at: float | None = None  # monotonic; where the call sits in the turn's timeline


@dataclass(frozen=True)
class SettledToolCall:
    """A tool call that reached its final status, as the session's record keeps it.

    ``arguments`` are the parsed arguments, or the model's raw text when they never
    parsed. Unless ``masked``, values are as the tool saw and returned them: whoever
    stores them scrubs them. ``masked``: the sandbox masked them all (``arguments`` is
    then its masked JSON text).
    """

    call_id: str
    name: str
    arguments: Any
    status: ToolStatus
    result: str | None  # JSON text given to the LLM
    error: str | None
    duration_ms: float
    log: str | None = None  # a server tool's console output, stored after the call
    masked: bool = False


@dataclass
class ProviderUse:
    """Which provider of a kind served a turn's calls, after how many retries, and why a
    fallback served (a ``providers.base.FAILURE_REASONS`` code; None: the primary did)."""

    served: str | None = None  # the last call's; None: no call, or every provider failed
    calls: int = 0
    retries: int = 0
    fallback_reason: str | None = None  # the turn's first

    def add(self, attempts: Attempts) -> None:
        """A call's ``resilience.Attempts`` (its ``report``)."""
        self.calls += 1
        self.served = attempts.served
        self.retries += attempts.retries
        self.fallback_reason = self.fallback_reason or attempts.fallback_reason

    def as_event(self) -> dict[str, Any] | None:
        if not self.calls:
            return None
        return {
            "provider": self.served,
            "retries": self.retries,
            "fallbackReason": self.fallback_reason,
        }


@dataclass
class TurnMetrics:
    """Monotonic timestamps (seconds) of one turn; ``None`` where it never got there.

    A spoken turn starts before ``input_at``: the user's last word ended at
    ``speech_end_at``, the recogniser decided the turn was over at ``endpoint_at`` and its
    final transcript arrived at ``input_at``.
    """

    turn_id: int
    source: Literal["speech", "text"]
    input_at: float  # final transcript or text received
    speech_end_at: float | None = None
    endpoint_at: float | None = None
    llm_request_at: float | None = None
    text_round_request_at: float | None = None  # request of the round that first wrote text
    first_llm_text_at: float | None = None
    first_tts_request_at: float | None = None
    first_tts_byte_at: float | None = None  # the first request's first audio from the engine
    first_audio_at: float | None = None  # first audio frame sent to the client
    end_at: float | None = None
    outcome: Literal["completed", "cancelled", "failed"] = "completed"
    llm_rounds: int = 0
    tool_calls: int = 0
    tools: list[ToolTiming] = field(default_factory=list)
    llm: ProviderUse = field(default_factory=ProviderUse)
    tts: ProviderUse = field(default_factory=ProviderUse)

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

    @property
    def end_of_utterance_ms(self) -> float | None:
        """Silence waited before the turn was called over."""
        return self._ms(self.speech_end_at, self.endpoint_at)

    @property
    def stt_final_ms(self) -> float | None:
        """From the end of the turn to its final transcript."""
        return self._ms(self.endpoint_at, self.input_at)

    @property
    def llm_first_token_ms(self) -> float | None:
        return self._ms(self.text_round_request_at, self.first_llm_text_at)

    @property
    def tts_first_byte_ms(self) -> float | None:
        return self._ms(self.first_tts_request_at, self.first_tts_byte_at)

    @property
    def first_audio_ms(self) -> float | None:
        """The user stopped speaking (or sent text) → the first audio frame went out."""
        return self._ms(self.origin_at, self.first_audio_at)

    @property
    def turn_ms(self) -> float | None:
        """The user stopped speaking (or sent text) → the turn ended: from the same moment
        as ``first_audio_ms`` and the timeline, so it is never the smaller of the two."""
        return self._ms(self.origin_at, self.end_at)

    def as_event(self, *, usage: dict[str, int]) -> MetricsEvent:
        """The ``metrics`` event (milliseconds, ``None`` where unknown); ``usage`` in wire
        names."""

        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 1)

        return MetricsEvent(
            turn_id=self.turn_id,
            source=self.source,
            outcome=self.outcome,
            end_of_utterance_ms=rounded(self.end_of_utterance_ms),
            stt_final_ms=rounded(self.stt_final_ms),
            llm_first_token_ms=rounded(self.llm_first_token_ms),
            tts_first_byte_ms=rounded(self.tts_first_byte_ms),
            first_audio_ms=rounded(self.first_audio_ms),
            turn_ms=rounded(self.turn_ms),
            llm_rounds=self.llm_rounds,
            tools=[{"name": t.name, "status": t.status, "ms": rounded(t.ms)} for t in self.tools],
            timeline=self.timeline(),
            llm=self.llm.as_event(),
            tts=self.tts.as_event(),
            usage=usage,
        )

    @property
    def origin_at(self) -> float:
        """Where the turn's clock starts: the user's last word, else the text's arrival."""
        return self.speech_end_at if self.speech_end_at is not None else self.input_at

    def timeline(self) -> list[dict[str, Any]]:
        """The stages that happened, as ``{stage, startMs, endMs}`` from ``origin_at``.

        Ordered by start (the order a waterfall draws them), the whole turn last.
        """
        stages: list[tuple[str, float | None, float | None]] = [
            ("end_of_utterance", self.speech_end_at, self.endpoint_at),
            ("stt_final", self.endpoint_at, self.input_at),
            ("llm_first_token", self.text_round_request_at, self.first_llm_text_at),
        ]
        stages += [
            (f"tool:{tool.name}", tool.started_at, tool.started_at + tool.ms / 1000)
            for tool in self.tools
            if tool.started_at is not None
        ]
        stages += [
            ("tts_first_byte", self.first_tts_request_at, self.first_tts_byte_at),
            ("first_audio", self.first_audio_at, self.first_audio_at),
        ]
        origin = self.origin_at
        entries: list[dict[str, Any]] = [
            {
                "stage": stage,
                "startMs": round((start - origin) * 1000, 1),
                "endMs": round((end - origin) * 1000, 1),
            }
            for stage, start, end in stages
            if start is not None and end is not None
        ]
        entries.sort(key=lambda entry: entry["startMs"])  # stable: ties keep the order above
        if self.end_at is not None:
            entries.append(
                {"stage": "turn", "startMs": 0.0, "endMs": round((self.end_at - origin) * 1000, 1)}
            )
        return entries


def render_template(template: str, variables: dict[str, str]) -> str:
    """Fill ``{{name}}`` placeholders; unknown names become empty."""
    return _PLACEHOLDER_NAME.sub(lambda match: variables.get(match[1], ""), template)
