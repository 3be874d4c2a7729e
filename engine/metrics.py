"""Prometheus metrics of the realtime sessions in this process; the one module that defines them.

They are fed from what a session emits (``observe_event``) and from the connection's
open and close (``session_opened`` / ``session_closed``), so the orchestrator knows
nothing about them. Labels take values from fixed sets only: never a workspace, an
agent, a tool name or any text, so a scrape shows nothing about any tenant.

Each process (every daphne) has its own registry: scrape each process, and let
Prometheus sum across them.
"""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.exposition import choose_encoder

from engine.protocol import (
    ErrorCode,
    ErrorEvent,
    MetricsEvent,
    ServerEvent,
    ToolStatus,
    ToolStatusEvent,
)
from engine.providers import breaker
from engine.providers.base import FAILURE_REASONS

logger = logging.getLogger(__name__)

REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)

OTHER = "other"

# The `error` codes of the protocol; anything else is counted as "other".
ERROR_CODES = frozenset(code.value for code in ErrorCode)
TURN_OUTCOMES = frozenset({"completed", "cancelled", "failed"})
TOOL_OUTCOMES = frozenset(status.value for status in ToolStatus.finals())
# `MetricsEvent` field → stage label.
STAGES = {
    "end_of_utterance_ms": "end_of_utterance",
    "stt_final_ms": "stt_final",
    "llm_first_token_ms": "llm_first_token",
    "tts_first_byte_ms": "tts_first_byte",
    "first_audio_ms": "first_audio",
    "turn_ms": "turn",
}
# Seconds, from 10 ms to 10 s: where voice latencies live.
STAGE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)

SESSIONS_LIVE = Gauge(
    "voice_sessions_live", "Realtime sessions open in this process.", registry=REGISTRY
)
SESSIONS_STARTED = Counter(
    "voice_sessions_started", "Realtime sessions configured and started.", registry=REGISTRY
)
SESSIONS_ENDED = Counter(
    "voice_sessions_ended",
    "Realtime sessions ended, by WebSocket close code.",
    ["close_code"],
    registry=REGISTRY,
)
TURNS = Counter("voice_turns", "Assistant turns, by outcome.", ["outcome"], registry=REGISTRY)
TOOL_CALLS = Counter(
    "voice_tool_calls", "Tool calls (server and client), by outcome.", ["outcome"],
    registry=REGISTRY,
)  # fmt: skip
STAGE_SECONDS = Histogram(
    "voice_turn_stage_seconds",
    "Latency of each stage of a turn, from the turn's metrics event.",
    ["stage"],
    buckets=STAGE_BUCKETS,
    registry=REGISTRY,
)
PROVIDER_KINDS = ("llm", "tts")
PROVIDER_RETRIES = Counter(
    "voice_provider_retries",
    "Provider calls retried before they produced anything, by provider kind.",
    ["kind"],
    registry=REGISTRY,
)
PROVIDER_FALLBACKS = Counter(
    "voice_provider_fallbacks",
    "Turns a fallback provider served, by provider kind and why the one before it failed.",
    ["kind", "reason"],
    registry=REGISTRY,
)
CIRCUIT_CHANGES = ("opened", "closed")
CIRCUIT_CHANGED = Counter(
    "voice_provider_circuit_changes",
    "Circuit breakers of providers opened or closed (engine.providers.breaker), by kind.",
    ["kind", "change"],
    registry=REGISTRY,
)
CIRCUITS_OPEN = Gauge(
    "voice_provider_circuits_open",
    "Circuit breakers open now (a provider skipped for one tenant), by provider kind.",
    ["kind"],
    registry=REGISTRY,
)
ERRORS = Counter(
    "voice_errors", "error events sent to clients, by code.", ["code"], registry=REGISTRY
)

# Pre-create the series, so a dashboard shows 0 rather than nothing before the first event.
for _outcome in TURN_OUTCOMES:
    TURNS.labels(_outcome)
for _outcome in TOOL_OUTCOMES:
    TOOL_CALLS.labels(_outcome)
for _kind in PROVIDER_KINDS:
    PROVIDER_RETRIES.labels(_kind)
    CIRCUITS_OPEN.labels(_kind)
    for _change in CIRCUIT_CHANGES:
        CIRCUIT_CHANGED.labels(_kind, _change)


def circuit_changed(kind: str, opened: bool) -> None:
    """A breaker opened or closed; its kind only (never the workspace or provider)."""
    label = kind if kind in PROVIDER_KINDS else OTHER
    CIRCUIT_CHANGED.labels(label, "opened" if opened else "closed").inc()
    (CIRCUITS_OPEN.labels(label).inc if opened else CIRCUITS_OPEN.labels(label).dec)()


breaker.listeners.append(circuit_changed)


def _known(value: Any, allowed: frozenset[str]) -> str:
    return value if isinstance(value, str) and value in allowed else OTHER


def _close_code_label(close_code: int | None) -> str:
    if close_code is None:
        return "none"
    # Standard codes and ours (4000-4099): a bounded set of numbers, never free text.
    if isinstance(close_code, int) and (1000 <= close_code <= 1015 or 4000 <= close_code <= 4099):
        return str(close_code)
    return OTHER


def session_opened() -> None:
    SESSIONS_STARTED.inc()
    SESSIONS_LIVE.inc()


def session_closed(close_code: int | None) -> None:
    SESSIONS_LIVE.dec()
    SESSIONS_ENDED.labels(_close_code_label(close_code)).inc()


def observe_event(event: ServerEvent) -> None:
    """Count one server event. Never raises: metrics must not break a session."""
    try:
        _observe(event)
    except Exception as exc:
        logger.error("metrics: could not observe an event: %s", type(exc).__name__)


def _observe(event: ServerEvent) -> None:
    match event:
        case MetricsEvent() as turn:
            TURNS.labels(_known(turn.outcome, TURN_OUTCOMES)).inc()
            for field, stage in STAGES.items():
                value = getattr(turn, field)
                if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
                    STAGE_SECONDS.labels(stage).observe(value / 1000)
            _observe_provider_use("llm", turn.llm)
            _observe_provider_use("tts", turn.tts)
        case ToolStatusEvent(status=status) if status.final:
            TOOL_CALLS.labels(_known(status.value, TOOL_OUTCOMES)).inc()
        case ErrorEvent(code=code):
            ERRORS.labels(_known(code.value, ERROR_CODES)).inc()


def _observe_provider_use(kind: str, use: Any) -> None:
    """A turn's ``llm`` / ``tts`` field: its retries, and the fallback that served it."""
    if not isinstance(use, dict):
        return
    retries = use.get("retries")
    if isinstance(retries, int) and not isinstance(retries, bool) and retries > 0:
        PROVIDER_RETRIES.labels(kind).inc(retries)
    if use.get("fallbackReason") is not None and use.get("provider") is not None:
        PROVIDER_FALLBACKS.labels(kind, _known(use["fallbackReason"], FAILURE_REASONS)).inc()


def exposition(accept: str) -> tuple[bytes, str]:
    """This process's metrics in the format ``accept`` asks for (Prometheus text by default)."""
    encoder, content_type = choose_encoder(accept)
    return encoder(REGISTRY), content_type
