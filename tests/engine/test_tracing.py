"""The OpenTelemetry tracer, with the SDK's in-memory exporter: a turn's waterfall becomes a
turn span with a span per stage, at the stage's real times, under the session's span; no
attribute carries what was said or a tool's arguments."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from engine import tracing
from engine.protocol import Stamped, TurnEvent
from engine.tracing.otel import OTelTracer

TURN_END_MS = 1_700_000_000_000
METRICS = {
    "type": "metrics", "seq": 9, "ts": TURN_END_MS, "turnId": 1, "source": "speech",
    "outcome": "completed", "endOfUtteranceMs": 200.0, "sttFinalMs": 50.0,
    "llmFirstTokenMs": 300.0, "ttsFirstByteMs": 120.0, "firstAudioMs": 900.0,
    "turnMs": 2000.0, "llmRounds": 2,
    "tools": [{"name": "track_order", "status": "completed", "ms": 150.0}],
    "timeline": [
        {"stage": "end_of_utterance", "startMs": 0.0, "endMs": 200.0},
        {"stage": "stt_final", "startMs": 200.0, "endMs": 250.0},
        {"stage": "tool:track_order", "startMs": 260.0, "endMs": 410.0},
        {"stage": "llm_first_token", "startMs": 420.0, "endMs": 720.0},
        {"stage": "tts_first_byte", "startMs": 730.0, "endMs": 850.0},
        {"stage": "first_audio", "startMs": 900.0, "endMs": 900.0},
        {"stage": "turn", "startMs": 0.0, "endMs": 2000.0},
    ],
    "llm": {"provider": "platform:gpt-4o-mini", "retries": 1, "fallbackReason": None},
    "tts": {"provider": "piper", "retries": 0, "fallbackReason": None},
    "usage": {"llmRequests": 2},
}  # fmt: skip


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = tracing.install(OTelTracer(provider))
    yield exporter
    tracing.install(previous)


def _by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


def test_a_turn_becomes_spans_at_the_waterfalls_times(exported: InMemorySpanExporter) -> None:
    trace = tracing.tracer().session("abc123", {"workspace.id": 7, "voice.mode": "voice"})
    trace.observe(Stamped(TurnEvent(text="where is my order 1042"), seq=1, ts=0))  # not a span
    trace.observe(Stamped.from_wire(METRICS))
    trace.end(1000)

    spans = _by_name(exported.get_finished_spans())
    assert set(spans) == {
        "voice.session", "voice.turn", "voice.end_of_turn", "voice.stt", "voice.tool_call",
        "voice.llm_request", "voice.tts_first_byte",
    }  # fmt: skip
    session, turn = spans["voice.session"], spans["voice.turn"]
    assert session.attributes is not None and turn.attributes is not None
    assert dict(session.attributes) == {
        "session.id": "abc123", "workspace.id": 7, "voice.mode": "voice",
        "voice.close_code": 1000, "voice.moved": False,
    }  # fmt: skip
    assert turn.parent is not None and turn.parent.span_id == session.context.span_id
    start = (TURN_END_MS - 2000) * 1_000_000
    assert (turn.start_time, turn.end_time) == (start, TURN_END_MS * 1_000_000)
    assert turn.attributes["voice.first_audio_ms"] == 900.0
    assert turn.attributes["llm.provider"] == "platform:gpt-4o-mini"

    llm, tool = spans["voice.llm_request"], spans["voice.tool_call"]
    assert llm.parent is not None and llm.parent.span_id == turn.context.span_id
    assert (llm.start_time, llm.end_time) == (start + 420_000_000, start + 720_000_000)
    assert llm.attributes is not None and llm.attributes["llm.retries"] == 1
    assert tool.attributes is not None
    assert (tool.attributes["tool.name"], tool.attributes["tool.status"]) == (
        "track_order", "completed",
    )  # fmt: skip
    everything = repr([dict(span.attributes or {}) for span in spans.values()])
    assert "1042" not in everything and "where is" not in everything


def test_the_default_tracer_records_nothing() -> None:
    trace = tracing.NoTracer().session("abc", {})
    trace.observe(Stamped.from_wire(METRICS))
    trace.end(1000)  # nothing to see, nothing raised
    assert trace is tracing.NO_TRACE


def test_otlp_is_chosen_only_when_its_endpoint_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    previous = tracing.install(tracing.NoTracer())
    try:
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
        tracing.configure_from_environment()
        assert isinstance(tracing.tracer(), tracing.NoTracer)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
        tracing.configure_from_environment()
        assert isinstance(tracing.tracer(), OTelTracer)
    finally:
        tracing.install(previous)
