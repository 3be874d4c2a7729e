"""The OpenTelemetry tracer: a span per session, per turn and per stage of a turn.

Spans are made from what the session already measures: each turn's ``metrics`` event
carries its waterfall (``timeline``: stages in milliseconds from the turn's start) and the
event's ``ts`` is the turn's end, so the turn's spans are written when it ends, with their
real start and end times, as children of the session's span (open until the session ends).

    voice.session                 session.id, workspace.id, voice.mode, voice.close_code
      voice.turn                  voice.turn.id, .source, .outcome, .llm_rounds, *_ms figures
        voice.end_of_turn         the silence waited before the turn was called over
        voice.stt                 end of turn → final transcript
        voice.llm_request         request → first token; llm.provider, llm.retries
        voice.tool_call           tool.name, tool.status
        voice.tts_first_byte      request → first audio; tts.provider

No attribute holds what was said, a prompt, or a tool's arguments or result.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from engine.protocol import MetricsEvent, Stamped
from engine.tracing import SessionTrace

logger = logging.getLogger(__name__)

SERVICE_NAME = "voice-agent-platform"
_NS_PER_MS = 1_000_000
# Timeline stage → span name (``tool:NAME`` → voice.tool_call); ``first_audio`` (an
# instant) and ``turn`` (the parent itself) are not spans.
STAGE_SPANS = {
    "end_of_utterance": "voice.end_of_turn",
    "stt_final": "voice.stt",
    "llm_first_token": "voice.llm_request",
    "tts_first_byte": "voice.tts_first_byte",
}
TURN_FIGURES = {
    "endOfUtteranceMs": "voice.end_of_utterance_ms",
    "sttFinalMs": "voice.stt_final_ms",
    "llmFirstTokenMs": "voice.llm_first_token_ms",
    "ttsFirstByteMs": "voice.tts_first_byte_ms",
    "firstAudioMs": "voice.first_audio_ms",
    "turnMs": "voice.turn_ms",
}


def otlp_provider() -> TracerProvider:
    """Spans batched to the OTLP/HTTP exporter (``OTEL_EXPORTER_OTLP_*`` configure it)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


class OTelTracer:
    def __init__(self, provider: TracerProvider) -> None:
        self._provider = provider
        self._tracer = provider.get_tracer("engine.tracing")

    def force_flush(self) -> bool:
        """Export what is batched now (tests; a process that is about to stop)."""
        return bool(self._provider.force_flush())

    def session(self, session_id: str, attributes: dict[str, str | int | bool]) -> SessionTrace:
        span = self._tracer.start_span(
            "voice.session", attributes={"session.id": session_id, **attributes}
        )
        return _OTelSessionTrace(self._tracer, span)


def _provider_attributes(prefix: str, use: Any) -> dict[str, Any]:
    if not isinstance(use, dict):
        return {}
    found = {
        f"{prefix}.provider": use.get("provider"),
        f"{prefix}.retries": use.get("retries"),
        f"{prefix}.fallback_reason": use.get("fallbackReason"),
    }
    return {name: value for name, value in found.items() if isinstance(value, str | int)}


class _OTelSessionTrace:
    def __init__(self, tracer: trace.Tracer, span: trace.Span) -> None:
        self._tracer, self._span = tracer, span
        self._context = trace.set_span_in_context(span)

    def observe(self, event: Stamped) -> None:
        if not isinstance(event.event, MetricsEvent):
            return
        try:
            self._turn(event.to_wire())  # once a turn: its waterfall as the page reads it
        except Exception as exc:  # a trace must never break a session
            logger.error("tracing: a turn was not traced: %s", type(exc).__name__)

    def end(self, close_code: int | None, *, moved: bool = False) -> None:
        try:
            if close_code is not None:
                self._span.set_attribute("voice.close_code", close_code)
            self._span.set_attribute("voice.moved", moved)
            self._span.end()
        except Exception as exc:
            logger.error("tracing: a session was not traced: %s", type(exc).__name__)

    def _turn(self, event: dict[str, Any]) -> None:
        timeline = [e for e in event.get("timeline") or [] if isinstance(e, dict)]
        ends = [float(e["endMs"]) for e in timeline if isinstance(e.get("endMs"), int | float)]
        length_ms = max(ends, default=0.0)
        origin_ns = int(event["ts"]) * _NS_PER_MS - int(length_ms * _NS_PER_MS)
        attributes: dict[str, Any] = {
            "voice.turn.id": event.get("turnId"),
            "voice.turn.source": event.get("source"),
            "voice.turn.outcome": event.get("outcome"),
            "voice.turn.llm_rounds": event.get("llmRounds"),
        }
        for field, name in TURN_FIGURES.items():
            attributes[name] = event.get(field)
        attributes.update(_provider_attributes("llm", event.get("llm")))
        attributes.update(_provider_attributes("tts", event.get("tts")))
        turn = self._tracer.start_span(
            "voice.turn",
            context=self._context,
            start_time=origin_ns,
            attributes={k: v for k, v in attributes.items() if v is not None},
        )
        self._stages(event, timeline, turn, origin_ns)
        turn.end(end_time=origin_ns + int(length_ms * _NS_PER_MS))

    def _stages(
        self, event: dict[str, Any], timeline: list[dict[str, Any]], turn: trace.Span, origin: int
    ) -> None:
        context = trace.set_span_in_context(turn)
        statuses: dict[str, list[str]] = defaultdict(list)
        for tool in event.get("tools") or []:
            statuses[str(tool.get("name"))].append(str(tool.get("status")))
        for entry in timeline:
            stage = str(entry.get("stage"))
            attributes: dict[str, Any] = {"voice.stage": stage}
            if stage.startswith("tool:"):
                name, tool = "voice.tool_call", stage.removeprefix("tool:")
                attributes["tool.name"] = tool
                if statuses[tool]:
                    attributes["tool.status"] = statuses[tool].pop(0)
            elif stage in STAGE_SPANS:
                name = STAGE_SPANS[stage]
                if stage == "llm_first_token":
                    attributes.update(_provider_attributes("llm", event.get("llm")))
                elif stage == "tts_first_byte":
                    attributes.update(_provider_attributes("tts", event.get("tts")))
            else:
                continue
            span = self._tracer.start_span(
                name,
                context=context,
                start_time=origin + int(float(entry["startMs"]) * _NS_PER_MS),
                attributes=attributes,
            )
            span.end(end_time=origin + int(float(entry["endMs"]) * _NS_PER_MS))
