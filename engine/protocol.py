"""Wire protocol v1: client messages, server events, error codes, and the two codecs.

Client -> server is always v1 JSON. Server -> client events are typed (``ServerEvent``
subclasses, listed once in ``SERVER_EVENTS``); ``to_wire`` gives the one internal shape,
``{"type": ..., "seq": ..., "ts": ..., **data}`` (the orchestrator assigns ``seq`` and
``ts``), encoded either as v1 JSON or as the VoiceIDE envelope, chosen at connect time.
Every ``error`` event's code is an ``ErrorCode``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import IntEnum, StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

# ---------------------------------------------------------------- limits

TEXT_FRAME_MAX = 256 * 1024  # bytes of one JSON text frame
BINARY_FRAME_MAX = 64 * 1024  # bytes of one audio frame
INSTRUCTIONS_MAX = 16 * 1024
GREETING_MAX = 1024
VARIABLES_MAX = 64
VARIABLE_VALUE_MAX = 4 * 1024
TOOLS_MAX = 32
TOOL_DESCRIPTION_MAX = 1024
TOOL_HANDLER_MAX = 64 * 1024
TOOL_TIMEOUT_MS_MIN = 100
TOOL_TIMEOUT_MS_MAX = 60_000
TEXT_MAX = 4 * 1024
CONTEXT_TEXT_MAX = 4 * 1024
SHORT_STRING_MAX = 256  # agent slugs, voices, call ids, session ids, tokens
EMPTY_REPLY_MAX = 256
VOCABULARY_MAX = 100  # terms (AssemblyAI's keyterms take up to 100…
VOCABULARY_TERM_MAX = 50  # …of at most 50 characters each)
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"

PROTOCOL_VERSION = 1
CLIENT_SAMPLE_RATE = 16_000

# How much of the client's own input an error message may quote.
_QUOTE_MAX = 64
_ERRORS_SHOWN = 3


class CloseCode(IntEnum):
    """The WebSocket close codes of protocol v1, listed once (docs/protocol.md, "Connecting",
    lists the same). 4000-4999 is the application range; 4000-4099 are refusals the browser
    library does not retry. An ``IntEnum``: on the wire and in the records each is its plain
    number."""

    NORMAL = 1000  # the client stopped
    GOING_AWAY = 1001  # its page went away
    NO_STATUS = 1005
    ABNORMAL = 1006  # the connection was lost
    SERVER_ERROR = 1011
    RESTART = 1012  # the platform restarted while the session was live (set on its record)
    NO_CONFIGURE = 4000
    BAD_KEY = 4001  # also: a revoked or expired key ends its live sessions
    SECRET_KEY = 4002
    ORIGIN = 4003
    AGENT = 4004
    INLINE_REFUSED = 4008
    ENDED = 4009  # ended by the workspace (dashboard or API)
    IDLE = 4010
    TOO_LONG = 4011
    # Another connection resumed this session. A refusal (the old page must not resume it
    # back): 1001 would say "going away", but daphne may not send it, and the socket stayed
    # open.
    DISPLACED = 4012
    TOO_MANY = 4029
    QUOTA_EXCEEDED = 4030  # the workspace used up a quota (usage_app.quotas)
    # A service the session needs (Redis) is down: try again later. (1013 would say so,
    # but daphne may only send 1000 or 3000-4999.)
    TRY_AGAIN = 4503
    RESUME_REFUSED = 4001  # a resume with the wrong token, like a wrong key


class ToolStatus(StrEnum):
    """Where a call stands: ``started``, then one final status."""

    STARTED = "started"
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        return self is not ToolStatus.STARTED

    @property
    def failed(self) -> bool:
        """The call did not give the LLM a result (what a ``tool.failed`` webhook reports)."""
        return self in (ToolStatus.FAILED, ToolStatus.TIMED_OUT)

    @property
    def label(self) -> str:
        return "timed out" if self is ToolStatus.TIMED_OUT else self.value.capitalize()

    @classmethod
    def finals(cls) -> tuple[ToolStatus, ...]:
        return tuple(status for status in cls if status.final)


class ErrorCode(StrEnum):
    """Every ``code`` an ``error`` event may carry (docs/protocol.md, "Error codes").

    A ``StrEnum``: on the wire each is its plain string. A code not listed here cannot
    be sent (``ErrorEvent`` refuses it), and the metrics count errors by these labels. A new
    code is a member here and a row in docs/protocol.md's "Error codes" table (a test compares
    the two).
    """

    # A frame the session cannot use; the session stays usable.
    BAD_JSON = "bad_json"
    BAD_MESSAGE = "bad_message"
    UNKNOWN_TYPE = "unknown_type"
    INVALID = "invalid"
    FRAME_TOO_LARGE = "frame_too_large"
    NOT_CONFIGURED = "not_configured"
    ALREADY_CONFIGURED = "already_configured"
    NOT_VOICE_MODE = "not_voice_mode"
    UNKNOWN_TOOL_CALL = "unknown_tool_call"
    CONTEXT_LIMIT = "context_limit"
    RATE_LIMITED = "rate_limited"
    # Providers and the platform.
    LLM_FAILED = "llm_failed"
    STT_FAILED = "stt_failed"
    TTS_FAILED = "tts_failed"
    VOICE_UNAVAILABLE = "voice_unavailable"
    INTERNAL = "internal"
    SERVICE_UNAVAILABLE = "service_unavailable"
    # Resuming a session.
    RESUME_UNAVAILABLE = "resume_unavailable"
    RESUME_REFUSED = "resume_refused"
    # Refusals: the socket closes.
    CONFIGURE_TIMEOUT = "configure_timeout"
    BAD_PROTOCOL = "bad_protocol"
    INVALID_KEY = "invalid_key"
    INVALID_TOKEN = "invalid_token"
    TOKEN_REQUIRED = "token_required"
    SECRET_KEY_REFUSED = "secret_key_refused"
    ORIGIN_NOT_ALLOWED = "origin_not_allowed"
    AGENT_NOT_ALLOWED = "agent_not_allowed"
    INLINE_CONFIG_REFUSED = "inline_config_refused"
    INLINE_CODE_REFUSED = "inline_code_refused"
    TOO_MANY_SESSIONS = "too_many_sessions"
    TOO_MANY_SESSIONS_FROM_ADDRESS = "too_many_sessions_from_address"
    TOO_MANY_CONNECTIONS = "too_many_connections"
    TOO_MANY_MESSAGES = "too_many_messages"
    AUDIO_TOO_FAST = "audio_too_fast"
    QUOTA_EXCEEDED = "quota_exceeded"
    # A live session ends.
    KEY_REVOKED = "key_revoked"
    KEY_EXPIRED = "key_expired"
    SESSION_ENDED = "session_ended"
    SESSION_IDLE = "session_idle"
    SESSION_TOO_LONG = "session_too_long"
    SESSION_DISPLACED = "session_displaced"


# What a page hears when a provider fails: a fixed sentence per code, never the provider's
# own words (they may quote a key, an address or the text being spoken). The detail,
# scrubbed, is kept with the session's record for its dashboard page.
PROVIDER_FAILURES: dict[ErrorCode, str] = {
    ErrorCode.LLM_FAILED: "The language model is unavailable right now; "
    "the session's page on the dashboard says why.",
    ErrorCode.STT_FAILED: "Speech recognition is unavailable right now; "
    "the session's page on the dashboard says why.",
    ErrorCode.TTS_FAILED: "The voice is unavailable right now; "
    "the session's page on the dashboard says why.",
}


class ProtocolError(ValueError):
    """A client frame that cannot be used. ``code`` is the wire error code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message


# ---------------------------------------------------------------- field types


def _max_bytes(limit: int) -> AfterValidator:
    def check(value: str) -> str:
        # Characters are never fewer than bytes, so the cheap test settles most strings.
        if len(value) > limit or len(value.encode("utf-8")) > limit:
            raise PydanticCustomError(
                "too_long", "must be at most {limit} bytes (UTF-8)", {"limit": limit}
            )
        return value

    return AfterValidator(check)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank", "must not be empty")
    return value


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("number_type", "must be a number")
    return value


Name = Annotated[str, Field(pattern=NAME_PATTERN)]
ShortString = Annotated[str, _max_bytes(SHORT_STRING_MAX)]
VariableValue = Annotated[str, _max_bytes(VARIABLE_VALUE_MAX)]
Variables = Annotated[dict[Name, VariableValue], Field(max_length=VARIABLES_MAX)]
VocabularyTerm = Annotated[str, Field(max_length=VOCABULARY_TERM_MAX), AfterValidator(_not_blank)]
Vocabulary = Annotated[list[VocabularyTerm], Field(max_length=VOCABULARY_MAX)]


class _Message(BaseModel):
    # Strict: JSON types only, no "5" for 5; camelCase on the wire, snake_case in Python.
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,
    )


# ---------------------------------------------------------------- client messages


class ToolDeclaration(_Message):
    """A tool as the browser declares it; ``parameters`` is still the simplified form."""

    name: Name
    description: Annotated[str, _max_bytes(TOOL_DESCRIPTION_MAX)] = ""
    parameters: dict[str, Any] | None = None
    handler: Annotated[str, _max_bytes(TOOL_HANDLER_MAX), AfterValidator(_not_blank)] | None = None
    client: bool = False
    timeout_ms: Annotated[int, Field(ge=TOOL_TIMEOUT_MS_MIN, le=TOOL_TIMEOUT_MS_MAX)] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ToolDeclaration:
        if (self.handler is not None) == self.client:
            raise PydanticCustomError(
                "tool_kind", "exactly one of handler (server tool) or client: true is required"
            )
        return self


class ConfigureMessage(_Message):
    type: Literal["configure"] = "configure"
    agent: ShortString | None = None
    instructions: Annotated[str, _max_bytes(INSTRUCTIONS_MAX)] | None = None
    greeting: Annotated[str, _max_bytes(GREETING_MAX)] | None = None
    voice: ShortString | None = None
    mode: Literal["voice", "text"] | None = None
    variables: Variables | None = None
    tools: Annotated[list[ToolDeclaration], Field(max_length=TOOLS_MAX)] | None = None
    # Words the user is expected to say (names, code identifiers): recognition hints.
    vocabulary: Vocabulary | None = None
    # Said when the LLM's reply is empty (instead of silence).
    empty_reply: Annotated[str, _max_bytes(EMPTY_REPLY_MAX)] | None = None
    # False: the page cannot play audio yet (no user gesture); the greeting is spoken
    # once it sends `audio_ready`.
    audio_ready: bool = True

    @field_validator("tools")
    @classmethod
    def _unique_names(cls, tools: list[ToolDeclaration] | None) -> list[ToolDeclaration] | None:
        seen: set[str] = set()
        for index, tool in enumerate(tools or ()):
            if tool.name in seen:
                raise PydanticCustomError(
                    "duplicate_tool_name", "duplicate tool name", {"index": index}
                )
            seen.add(tool.name)
        return tools


class CancelMessage(_Message):
    type: Literal["cancel"] = "cancel"
    played_ms: Annotated[int, Field(ge=0)] | None = None


class AudioReadyMessage(_Message):
    type: Literal["audio_ready"] = "audio_ready"


class ResetMessage(_Message):
    type: Literal["reset"] = "reset"


class TextMessage(_Message):
    type: Literal["text"] = "text"
    text: Annotated[str, _max_bytes(TEXT_MAX), AfterValidator(_not_blank)]


class ContextMessage(_Message):
    type: Literal["context"] = "context"
    variables: Variables | None = None
    text: Annotated[str, _max_bytes(CONTEXT_TEXT_MAX)] | None = None


class ToolResultMessage(_Message):
    type: Literal["tool_result"] = "tool_result"
    call_id: Annotated[ShortString, AfterValidator(_not_blank)]
    result: Any = None
    error: str | None = None

    @property
    def has_result(self) -> bool:
        return "result" in self.model_fields_set


class PingMessage(_Message):
    type: Literal["ping"] = "ping"
    t: Annotated[Any, AfterValidator(_number)] = None


class ResumeMessage(_Message):
    type: Literal["resume"] = "resume"
    session_id: Annotated[ShortString, AfterValidator(_not_blank)]
    resume_token: Annotated[ShortString, AfterValidator(_not_blank)]
    last_seq: Annotated[int, Field(ge=0)]


ClientMessage = Annotated[
    ConfigureMessage
    | CancelMessage
    | ResetMessage
    | TextMessage
    | ContextMessage
    | ToolResultMessage
    | PingMessage
    | AudioReadyMessage
    | ResumeMessage,
    Field(discriminator="type"),
]

MESSAGE_TYPES: dict[str, type[_Message]] = {
    "configure": ConfigureMessage,
    "cancel": CancelMessage,
    "reset": ResetMessage,
    "text": TextMessage,
    "context": ContextMessage,
    "tool_result": ToolResultMessage,
    "ping": PingMessage,
    "audio_ready": AudioReadyMessage,
    "resume": ResumeMessage,
}


# ---------------------------------------------------------------- decoding


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(literal: str) -> float:
    # 1e309 is valid JSON but overflows to inf, which no JSON encoder (ours included) may
    # send back out: a `ping` echoing it would fail while answering.
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return value


# Half of a UTF-16 pair, alone (what JSON's "\\ud800" escape parses to): UTF-8 cannot carry it.
SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = "the frame is not valid JSON: it holds a lone surrogate (not Unicode)"


def strings_in(obj: Any) -> Iterator[str]:
    """Every string in a JSON value, keys too (iterative: values may nest deeply)."""
    pending = [obj]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)


def _has_lone_surrogate(obj: Any) -> bool:
    return any(SURROGATE.search(text) for text in strings_in(obj))


def decode(text: str) -> ClientMessage:
    """Parse one client text frame, or raise ``ProtocolError`` saying what is wrong."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if len(text) > TEXT_FRAME_MAX or size > TEXT_FRAME_MAX:
        raise ProtocolError(
            ErrorCode.FRAME_TOO_LARGE, f"text frames are limited to {TEXT_FRAME_MAX} bytes"
        )
    # A lone surrogate cannot be encoded as UTF-8: not on the wire, not in the database,
    # not back to the client (RFC 7493 forbids "\uDEAD" escapes for the same reason).
    # Raw ones only reach us from a server that did not check the frame's UTF-8.
    if SURROGATE.search(text):
        raise ProtocolError(ErrorCode.BAD_JSON, _LONE_SURROGATE)
    try:
        obj = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except (ValueError, RecursionError):
        raise ProtocolError(ErrorCode.BAD_JSON, "the frame is not valid JSON") from None
    if _ESCAPED_SURROGATE.search(text) and _has_lone_surrogate(obj):
        raise ProtocolError(ErrorCode.BAD_JSON, _LONE_SURROGATE)
    if not isinstance(obj, dict):
        raise ProtocolError(ErrorCode.BAD_MESSAGE, "a message must be a JSON object")
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise ProtocolError(ErrorCode.BAD_MESSAGE, "a message needs a string field 'type'")
    model = MESSAGE_TYPES.get(kind)
    if model is None:
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"unknown message type {_quote(kind)}")
    try:
        # Every class in MESSAGE_TYPES is one of ClientMessage's members.
        return model.model_validate(obj, by_alias=True, by_name=False)  # type: ignore[return-value]
    except ValidationError as exc:
        raise ProtocolError(ErrorCode.INVALID, describe_errors(exc)) from None


def error_locations(exc: ValidationError) -> list[tuple[tuple[Any, ...], str]]:
    """Each error's location (``("tools", 2, "name")``) and message, every one."""
    found = []
    for error in exc.errors(include_url=False, include_input=False):
        loc = tuple(error["loc"])
        if error["type"] == "duplicate_tool_name":
            loc = (*loc, error["ctx"]["index"], "name")
        found.append((loc, error["msg"]))
    return found


def describe_errors(exc: ValidationError) -> str:
    """``tools[2].name: String should match …; mode: …`` for the first few errors."""
    parts = []
    for loc, message in error_locations(exc)[:_ERRORS_SHOWN]:
        path = format_loc(loc)
        parts.append(f"{path}: {message}" if path else message)
    remaining = exc.error_count() - _ERRORS_SHOWN
    if remaining > 0:
        parts.append(f"and {remaining} more")
    return "; ".join(parts)


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


def format_loc(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":
            path += " (name)"
        elif _IDENTIFIER.match(part) and len(part) <= _QUOTE_MAX:
            path += f".{part}" if path else part
        else:
            path += f"[{_quote(part)}]"
    return path


def _quote(value: str) -> str:
    if len(value) > _QUOTE_MAX:
        value = value[:_QUOTE_MAX] + "…"
    return json.dumps(value, ensure_ascii=False)


# ---------------------------------------------------------------- server events


def camel_name(snake: str) -> str:
    """``tool_status`` -> ``toolStatus``: event kinds for VoiceIDE, field names on the wire."""
    head, *rest = snake.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


# The metadata of a field that is left off the wire while it is None.
_OMIT_IF_NONE = {"omit_if_none": True}


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerEvent:
    """One server -> client event: ``TYPE`` is its wire name, its fields are snake_case here
    and camelCase on the wire. ``seq`` and ``ts`` are not fields: the emitter stamps them."""

    TYPE: ClassVar[str]
    VOICEIDE_NAME: ClassVar[str | None] = None  # its VoiceIDE kind, if not camelCase(TYPE)

    def data(self) -> dict[str, Any]:
        """The event's fields as sent, without ``type``, ``seq`` and ``ts``."""
        data = {}
        for name, key, omit_if_none in _wire_fields(type(self)):
            value = getattr(self, name)
            if value is None and omit_if_none:
                continue
            data[key] = value.value if isinstance(value, StrEnum) else value
        return data

    def to_wire(self, *, seq: int, ts: int) -> dict[str, Any]:
        """The internal wire shape that both codecs encode."""
        return {"type": self.TYPE, "seq": seq, "ts": ts, **self.data()}


_WIRE_FIELDS: dict[type[ServerEvent], tuple[tuple[str, str, bool], ...]] = {}


def _wire_fields(event_type: type[ServerEvent]) -> tuple[tuple[str, str, bool], ...]:
    """(field name, wire key, left off while None) of each field; worked out once a type."""
    found = _WIRE_FIELDS.get(event_type)
    if found is None:
        found = _WIRE_FIELDS[event_type] = tuple(
            (f.name, camel_name(f.name), bool(f.metadata.get("omit_if_none")))
            for f in dataclasses.fields(event_type)
        )
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadyEvent(ServerEvent):
    TYPE = "ready"
    VOICEIDE_NAME = "sessionStart"
    session_id: str
    resume_token: str
    sample_rate: int = CLIENT_SAMPLE_RATE
    tts_sample_rate: int
    protocol_version: int = PROTOCOL_VERSION
    mode: str
    llm: str
    notice: dict[str, str] | None = field(
        default=None, metadata=_OMIT_IF_NONE
    )  # the workspace has no language model


@dataclass(frozen=True, slots=True, kw_only=True)
class GreetingEvent(ServerEvent):
    TYPE = "greeting"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptEvent(ServerEvent):
    TYPE = "transcript"
    VOICEIDE_NAME = "userAudioTranscriptPartial"
    text: str
    final: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEvent(ServerEvent):
    TYPE = "turn"
    VOICEIDE_NAME = "userAudioTranscriptFinal"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingEvent(ServerEvent):
    TYPE = "thinking"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatDeltaEvent(ServerEvent):
    TYPE = "chat_delta"
    VOICEIDE_NAME = "assistantSpeechPartial"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatEvent(ServerEvent):
    TYPE = "chat"
    VOICEIDE_NAME = "assistantSpeechFinal"
    text: str
    steps: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEvent(ServerEvent):
    TYPE = "tool_call"
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStatusEvent(ServerEvent):
    TYPE = "tool_status"
    call_id: str
    name: str
    status: ToolStatus

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", ToolStatus(self.status))


@dataclass(frozen=True, slots=True, kw_only=True)
class TtsDoneEvent(ServerEvent):
    TYPE = "tts_done"


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelledEvent(ServerEvent):
    TYPE = "cancelled"
    reason: str  # cancel, barge_in, new_turn, reset


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsEvent(ServerEvent):
    """After each turn: its latencies in milliseconds (None where a stage did not happen)
    and what the session consumed since the previous turn ended."""

    TYPE = "metrics"
    turn_id: int
    source: str
    outcome: str
    end_of_utterance_ms: float | None
    stt_final_ms: float | None
    llm_first_token_ms: float | None
    tts_first_byte_ms: float | None
    first_audio_ms: float | None
    turn_ms: float | None
    llm_rounds: int
    tools: list[dict[str, Any]]
    timeline: list[dict[str, Any]]
    # Which provider served the turn: {provider, retries, fallbackReason}, None where unused.
    llm: dict[str, Any] | None
    tts: dict[str, Any] | None
    usage: dict[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetEvent(ServerEvent):
    TYPE = "reset"


@dataclass(frozen=True, slots=True, kw_only=True)
class PongEvent(ServerEvent):
    TYPE = "pong"
    t: Any = field(default=None, metadata=_OMIT_IF_NONE)  # the ping's own `t`, echoed

    @classmethod
    def answering(cls, ping: PingMessage) -> PongEvent:
        return cls(t=ping.t)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconnectEvent(ServerEvent):
    """The web process is shutting down (a deploy): open a new connection now and
    ``resume``; the session goes on on another process with nothing lost."""

    TYPE = "reconnect"


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorEvent(ServerEvent):
    TYPE = "error"
    code: ErrorCode
    message: str

    def __post_init__(self) -> None:
        # A code outside the enum raises ValueError here: it is never sent.
        object.__setattr__(self, "code", ErrorCode(self.code))


# Every server event, by wire name: the one list (the codecs and ``event_from_wire`` read
# it). A new event is a dataclass above, listed here, with its wire shape in test_protocol.
SERVER_EVENTS: dict[str, type[ServerEvent]] = {
    event.TYPE: event
    for event in (
        ReadyEvent,
        GreetingEvent,
        TranscriptEvent,
        TurnEvent,
        ThinkingEvent,
        ChatDeltaEvent,
        ChatEvent,
        ToolCallEvent,
        ToolStatusEvent,
        TtsDoneEvent,
        CancelledEvent,
        MetricsEvent,
        ResetEvent,
        PongEvent,
        ReconnectEvent,
        ErrorEvent,
    )
}


def event_from_wire(wire: dict[str, Any]) -> ServerEvent:
    """The typed event of a wire dict (``to_wire``'s inverse; ``seq`` and ``ts`` dropped).
    Raises ValueError for an unknown type or field, TypeError for a missing field."""
    kind = wire.get("type")
    event_type = SERVER_EVENTS.get(kind) if isinstance(kind, str) else None
    if event_type is None:
        raise ValueError(f"unknown server event type {kind!r}")
    names = {key: name for name, key, _ in _wire_fields(event_type)}
    fields = {key: value for key, value in wire.items() if key not in ("type", "seq", "ts")}
    if unknown := fields.keys() - names.keys():
        raise ValueError(f"{event_type.TYPE} has no field {sorted(unknown)[0]!r}")
    return event_type(**{names[key]: value for key, value in fields.items()})


@dataclass(frozen=True, slots=True)
class Stamped:
    """A server event as the session sent it: the event, its ``seq`` and its time. This is
    what leaves the session and what the host, its records, metrics and resume log, and
    every door read; ``to_wire`` is for codecs and stores only."""

    event: ServerEvent
    seq: int
    ts: int

    @property
    def type(self) -> str:
        return self.event.TYPE

    def to_wire(self) -> dict[str, Any]:
        return self.event.to_wire(seq=self.seq, ts=self.ts)

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Stamped:
        """What a store or another process kept (``to_wire``'s shape), typed again."""
        return cls(event_from_wire(wire), seq=int(wire["seq"]), ts=int(wire.get("ts", 0)))


# ---------------------------------------------------------------- server event codecs


def _dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _split(event: dict[str, Any]) -> tuple[str, int, int, dict[str, Any]]:
    data = {k: v for k, v in event.items() if k not in ("type", "seq", "ts")}
    return event["type"], event["seq"], event["ts"], data


class V1Codec:
    """``{"type": ..., "seq": .., "ts": .., **data}``."""

    name = "v1"

    def encode(self, event: dict[str, Any]) -> str:
        kind, seq, ts, data = _split(event)
        return _dumps({"type": kind, "seq": seq, "ts": ts, **data})


# Each event's name in the VoiceIDE envelope.
VOICEIDE_KINDS = {
    event_type: event.VOICEIDE_NAME or camel_name(event_type)
    for event_type, event in SERVER_EVENTS.items()
}


def iso_utc(ts_ms: int) -> str:
    moment = datetime.fromtimestamp(ts_ms / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class VoiceIDECodec:
    """``{"id", "seq", "timestamp", "kind": {camelName: data}}``.

    ``id`` is ``"<session>-<seq>"`` once the session id is known (given here, or taken
    from the ``ready`` event), else the seq as a string.
    """

    name = "voiceide"

    def __init__(self, session_id: str | None = None) -> None:
        self.session_id = session_id

    def encode(self, event: dict[str, Any]) -> str:
        kind, seq, ts, data = _split(event)
        if kind == ReadyEvent.TYPE and self.session_id is None:
            self.session_id = data.get("sessionId")
        event_id = f"{self.session_id}-{seq}" if self.session_id else str(seq)
        name = VOICEIDE_KINDS.get(kind) or camel_name(kind)
        return _dumps({"id": event_id, "seq": seq, "timestamp": iso_utc(ts), "kind": {name: data}})


def codec_for(name: str, *, session_id: str | None = None) -> V1Codec | VoiceIDECodec:
    if name == "v1":
        return V1Codec()
    if name == "voiceide":
        return VoiceIDECodec(session_id)
    raise ValueError(f"unknown protocol encoding {_quote(name)}; use 'v1' or 'voiceide'")
