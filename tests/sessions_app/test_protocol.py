from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine import metrics, protocol
from engine.protocol import ProtocolError, decode
from engine.providers.base import ProviderError
from engine.session import ToolDefinition
from tests.engine.providers.fake import FakeLLM, FakeSTT, tool_call
from tests.sessions_app.harness import Harness, started


def frame(**fields: Any) -> str:
    return json.dumps(fields)


def rejected(text: str) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        decode(text)
    return info.value


SERVER_TOOL = {
    "name": "get_weather",
    "description": "Weather",
    "parameters": {"city": "string"},
    "handler": "async () => 1",
}
CLIENT_TOOL = {"name": "open_file", "parameters": None, "client": True, "timeoutMs": 5000}


# ---------------------------------------------------------------- valid messages


def test_configure_with_everything() -> None:
    message = decode(
        frame(
            type="configure",
            agent="support",
            instructions="Be brief with {{name}}.",
            greeting="Hi!",
            voice="tara",
            mode="text",
            variables={"name": "Ada", "_x1": ""},
            tools=[SERVER_TOOL, CLIENT_TOOL],
        )
    )
    assert isinstance(message, protocol.ConfigureMessage)
    assert message.mode == "text"
    assert message.variables == {"name": "Ada", "_x1": ""}
    assert [tool.name for tool in message.tools or []] == ["get_weather", "open_file"]
    assert message.tools and message.tools[1].client and message.tools[1].timeout_ms == 5000
    assert message.tools[0].parameters == {"city": "string"}


def test_configure_may_be_empty() -> None:
    assert decode(frame(type="configure")) == protocol.ConfigureMessage()


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"type": "cancel"}, protocol.CancelMessage()),
        ({"type": "cancel", "playedMs": 1200}, protocol.CancelMessage(played_ms=1200)),
        ({"type": "reset"}, protocol.ResetMessage()),
        ({"type": "audio_ready"}, protocol.AudioReadyMessage()),
        ({"type": "configure", "audioReady": False}, protocol.ConfigureMessage(audio_ready=False)),
        ({"type": "text", "text": "hi"}, protocol.TextMessage(text="hi")),
        (
            {"type": "context", "variables": {"a": "b"}, "text": "note"},
            protocol.ContextMessage(variables={"a": "b"}, text="note"),
        ),
        ({"type": "context"}, protocol.ContextMessage()),
        ({"type": "ping", "t": 17.5}, protocol.PingMessage(t=17.5)),
        ({"type": "ping"}, protocol.PingMessage()),
        (
            {"type": "resume", "sessionId": "s1", "resumeToken": "r1", "lastSeq": 0},
            protocol.ResumeMessage(session_id="s1", resume_token="r1", last_seq=0),
        ),
    ],
)
def test_valid_messages(fields: dict[str, Any], expected: object) -> None:
    assert decode(json.dumps(fields)) == expected


def test_tool_result_tells_a_null_result_from_a_missing_one() -> None:
    with_null = decode(frame(type="tool_result", callId="c1", result=None))
    missing = decode(frame(type="tool_result", callId="c1", error="denied"))
    nested = decode(frame(type="tool_result", callId="c1", result={"lines": [1, 2]}))
    assert isinstance(with_null, protocol.ToolResultMessage) and with_null.has_result
    assert isinstance(missing, protocol.ToolResultMessage) and not missing.has_result
    assert missing.error == "denied"
    assert isinstance(nested, protocol.ToolResultMessage) and nested.result == {"lines": [1, 2]}


def test_ping_keeps_integers_as_integers() -> None:
    message = decode(frame(type="ping", t=1700000000000))
    assert isinstance(message, protocol.PingMessage) and message.t == 1700000000000
    assert isinstance(message.t, int)


# ---------------------------------------------------------------- invalid messages


@pytest.mark.parametrize(
    ("fields", "path", "words"),
    [
        ({"type": "configure", "mode": "video"}, "mode", "'voice' or 'text'"),
        (
            {"type": "configure", "instructions": "x" * (protocol.INSTRUCTIONS_MAX + 1)},
            "instructions",
            "16384 bytes",
        ),
        (
            {"type": "configure", "instructions": "é" * (protocol.INSTRUCTIONS_MAX // 2 + 1)},
            "instructions",
            "bytes",
        ),
        ({"type": "configure", "greeting": "x" * 1025}, "greeting", "1024 bytes"),
        ({"type": "configure", "voice": 7}, "voice", "string"),
        ({"type": "configure", "variables": {"1st": "a"}}, 'variables["1st"] (name)', "pattern"),
        ({"type": "configure", "variables": {"a": 1}}, "variables.a", "string"),
        ({"type": "configure", "variables": {"a": "x" * 4097}}, "variables.a", "4096 bytes"),
        ({"type": "configure", "variables": {f"v{i}": "" for i in range(65)}}, "variables", "64"),
        (
            {
                "type": "configure",
                "tools": [{**CLIENT_TOOL, "name": f"t{i}"} for i in range(33)],
            },
            "tools",
            "32",
        ),
        (
            {
                "type": "configure",
                "tools": [SERVER_TOOL, CLIENT_TOOL, {**CLIENT_TOOL, "name": "bad name"}],
            },
            "tools[2].name",
            "pattern",
        ),
        (
            {"type": "configure", "tools": [SERVER_TOOL, {**CLIENT_TOOL, "name": "get_weather"}]},
            "tools[1].name",
            "duplicate",
        ),
        ({"type": "configure", "tools": [{"name": "x"}]}, "tools[0]", "exactly one of handler"),
        (
            {"type": "configure", "tools": [{**SERVER_TOOL, "client": True}]},
            "tools[0]",
            "exactly one of handler",
        ),
        (
            {"type": "configure", "tools": [{**SERVER_TOOL, "handler": " "}]},
            "tools[0].handler",
            "empty",
        ),
        (
            {"type": "configure", "tools": [{**SERVER_TOOL, "handler": "x" * (64 * 1024 + 1)}]},
            "tools[0].handler",
            "65536 bytes",
        ),
        (
            {"type": "configure", "tools": [{**SERVER_TOOL, "description": "d" * 1025}]},
            "tools[0].description",
            "1024 bytes",
        ),
        (
            {"type": "configure", "tools": [{**SERVER_TOOL, "parameters": ["city"]}]},
            "tools[0].parameters",
            "dictionary",
        ),
        (
            {"type": "configure", "tools": [{**CLIENT_TOOL, "timeoutMs": 99}]},
            "tools[0].timeoutMs",
            "greater than or equal to 100",
        ),
        (
            {"type": "configure", "tools": [{**CLIENT_TOOL, "timeoutMs": 60001}]},
            "tools[0].timeoutMs",
            "less than or equal to 60000",
        ),
        (
            {"type": "configure", "tools": [{**CLIENT_TOOL, "timeoutMs": "500"}]},
            "tools[0].timeoutMs",
            "integer",
        ),
        (
            {"type": "configure", "tools": [{**CLIENT_TOOL, "client": "yes"}]},
            "tools[0].client",
            "boolean",
        ),
        (
            {"type": "configure", "tools": [{**CLIENT_TOOL, "color": "red"}]},
            "tools[0].color",
            "Extra inputs",
        ),
        ({"type": "configure", "colour": "red"}, "colour", "Extra inputs"),
        ({"type": "cancel", "playedMs": -1}, "playedMs", "greater than or equal to 0"),
        ({"type": "cancel", "playedMs": 1.5}, "playedMs", "integer"),
        ({"type": "reset", "hard": True}, "hard", "Extra inputs"),
        ({"type": "text"}, "text", "required"),
        ({"type": "text", "text": "  "}, "text", "empty"),
        ({"type": "text", "text": "x" * 4097}, "text", "4096 bytes"),
        ({"type": "context", "text": "x" * 4097}, "text", "4096 bytes"),
        ({"type": "context", "variables": {"a-b": "x"}}, 'variables["a-b"] (name)', "pattern"),
        ({"type": "tool_result"}, "callId", "required"),
        ({"type": "tool_result", "call_id": "c1"}, "call_id", "Extra inputs"),
        ({"type": "tool_result", "callId": "c1", "error": 5}, "error", "string"),
        ({"type": "ping", "t": "now"}, "t", "number"),
        ({"type": "ping", "t": True}, "t", "number"),
        ({"type": "resume", "sessionId": "s", "resumeToken": "r"}, "lastSeq", "required"),
        (
            {"type": "resume", "sessionId": "s", "resumeToken": "r", "lastSeq": -3},
            "lastSeq",
            "greater than or equal to 0",
        ),
        (
            {"type": "resume", "sessionId": "", "resumeToken": "r", "lastSeq": 1},
            "sessionId",
            "empty",
        ),
    ],
)
def test_invalid_messages_name_the_field(fields: dict[str, Any], path: str, words: str) -> None:
    error = rejected(json.dumps(fields))
    assert error.code == "invalid"
    segments = error.message.split("; ")
    assert any(s.startswith(f"{path}: ") and words in s for s in segments), error.message


def test_several_errors_are_joined_and_counted() -> None:
    error = rejected(frame(type="configure", mode="x", voice=1, agent=2, greeting=3, colour=4))
    assert error.message.count("; ") == 3
    assert error.message.endswith("and 2 more")


def test_unknown_type_names_it() -> None:
    error = rejected(frame(type="dance"))
    assert (error.code, error.message) == ("unknown_type", 'unknown message type "dance"')


def test_unknown_type_is_not_echoed_in_full() -> None:
    error = rejected(frame(type="x" * 100_000))
    assert error.code == "unknown_type"
    assert len(error.message) < 200


def test_huge_field_names_are_not_echoed_in_full() -> None:
    error = rejected(json.dumps({"type": "reset", "k" * 50_000: 1}))
    assert error.code == "invalid" and len(error.message) < 300


@pytest.mark.parametrize(
    "text", ["{", "not json", "", "{'type': 'ping'}", '{"type": "ping", "t": NaN}']
)
def test_bad_json(text: str) -> None:
    assert rejected(text).code == "bad_json"


@pytest.mark.parametrize("text", ["[]", "3", '"ping"', "null", "{}", '{"type": 3}', '{"t": 1}'])
def test_not_a_message(text: str) -> None:
    assert rejected(text).code == "bad_message"


def test_oversize_frame() -> None:
    text = frame(type="text", text="x" * protocol.TEXT_FRAME_MAX)
    error = rejected(text)
    assert error.code == "frame_too_large"
    assert len(error.message) < 100


def test_oversize_counts_utf8_bytes() -> None:
    padding = "é" * (protocol.TEXT_FRAME_MAX // 2)  # fewer characters than the limit
    assert len(padding) < protocol.TEXT_FRAME_MAX
    assert rejected(frame(type="context", pad=padding)).code == "frame_too_large"


def test_limits_are_published() -> None:
    assert protocol.TEXT_FRAME_MAX == 256 * 1024
    assert protocol.BINARY_FRAME_MAX == 64 * 1024


# ---------------------------------------------------------------- codecs

EVENT = {"type": "chat", "seq": 7, "ts": 1_700_000_000_123, "text": "Hi!", "steps": ["Using x"]}


def test_v1_codec_shape() -> None:
    encoded = json.loads(protocol.V1Codec().encode(EVENT))
    assert encoded == EVENT
    assert list(encoded)[:3] == ["type", "seq", "ts"]


def test_v1_codec_keeps_unicode_readable() -> None:
    assert "ü" in protocol.V1Codec().encode({**EVENT, "text": "Grüß"})


@pytest.mark.parametrize(
    ("event_type", "kind"),
    [
        ("ready", "sessionStart"),
        ("transcript", "userAudioTranscriptPartial"),
        ("turn", "userAudioTranscriptFinal"),
        ("chat_delta", "assistantSpeechPartial"),
        ("chat", "assistantSpeechFinal"),
        ("tool_call", "toolCall"),
        ("tool_result", "toolResult"),
        ("error", "error"),
        ("tts_done", "ttsDone"),
        ("tool_status", "toolStatus"),
        ("thinking", "thinking"),
        ("cancelled", "cancelled"),
        ("pong", "pong"),
        ("reconnect", "reconnect"),
    ],
)
def test_voiceide_kind_names(event_type: str, kind: str) -> None:
    encoded = json.loads(protocol.VoiceIDECodec().encode({"type": event_type, "seq": 1, "ts": 0}))
    assert list(encoded["kind"]) == [kind]


def test_voiceide_envelope() -> None:
    codec = protocol.VoiceIDECodec(session_id="abc")
    encoded = json.loads(codec.encode(EVENT))
    assert encoded == {
        "id": "abc-7",
        "seq": 7,
        "timestamp": "2023-11-14T22:13:20.123Z",
        "kind": {"assistantSpeechFinal": {"text": "Hi!", "steps": ["Using x"]}},
    }


def test_voiceide_ids_use_the_session_from_ready() -> None:
    codec = protocol.codec_for("voiceide")
    before = json.loads(codec.encode({"type": "pong", "seq": 1, "ts": 0}))
    ready = {"type": "ready", "seq": 2, "ts": 0, "sessionId": "s9", "resumeToken": "t"}
    start = json.loads(codec.encode(ready))
    after = json.loads(codec.encode({"type": "tts_done", "seq": 3, "ts": 0}))
    assert before["id"] == "1"
    assert start["id"] == "s9-2"
    assert start["kind"] == {"sessionStart": {"sessionId": "s9", "resumeToken": "t"}}
    assert after["id"] == "s9-3"


def test_voiceide_tool_call_keeps_v1_data_keys() -> None:
    data = {"callId": "c1", "name": "f", "arguments": {"a": 1}}
    event = {"type": "tool_call", "seq": 4, "ts": 0, **data}
    encoded = json.loads(protocol.VoiceIDECodec().encode(event))
    assert encoded["kind"] == {"toolCall": data}


def test_codec_for() -> None:
    assert isinstance(protocol.codec_for("v1"), protocol.V1Codec)
    assert isinstance(protocol.codec_for("voiceide"), protocol.VoiceIDECodec)
    with pytest.raises(ValueError, match="unknown protocol encoding"):
        protocol.codec_for("xml")


def test_client_messages_are_v1_whatever_the_codec() -> None:
    """The codecs encode server events only: every page sends v1 client messages, read by
    one decoder."""
    assert protocol.decode(frame(type="text", text="hi")) == protocol.TextMessage(text="hi")
    with pytest.raises(ProtocolError):
        protocol.decode(frame(type="nope"))
    assert not any(hasattr(protocol.codec_for(name), "decode") for name in ("v1", "voiceide"))


# ---------------------------------------------------------------- server events

METRICS_WIRE: dict[str, Any] = {
    "turnId": 2,
    "source": "speech",
    "outcome": "completed",
    "endOfUtteranceMs": 400.0,
    "sttFinalMs": 12.5,
    "llmFirstTokenMs": 230.1,
    "ttsFirstByteMs": None,
    "firstAudioMs": None,
    "turnMs": 910.0,
    "llmRounds": 2,
    "tools": [{"name": "get_weather", "status": "completed", "ms": 31.0}],
    "timeline": [{"stage": "turn", "startMs": 0.0, "endMs": 910.0}],
    "llm": {"provider": "platform:gpt", "retries": 1, "fallbackReason": None},
    "tts": None,
    "usage": {"llmRequests": 2, "promptTokens": 120},
}
NOTICE = {"message": "No language model is connected.", "setupUrl": "/dashboard/llm/"}

# Each event as the emitters build it, and the exact wire dict sent for it (without seq, ts).
WIRE_SHAPES: list[tuple[protocol.ServerEvent, dict[str, Any]]] = [
    (
        protocol.ReadyEvent(
            session_id="s1", resume_token="r1", tts_sample_rate=24_000, mode="voice", llm="gpt"
        ),
        {"type": "ready", "sessionId": "s1", "resumeToken": "r1", "sampleRate": 16_000,
         "ttsSampleRate": 24_000, "protocolVersion": 1, "mode": "voice", "llm": "gpt"},
    ),
    (
        protocol.ReadyEvent(
            session_id="s1", resume_token="r1", tts_sample_rate=24_000, mode="text",
            llm="offline", notice=NOTICE,
        ),
        {"type": "ready", "sessionId": "s1", "resumeToken": "r1", "sampleRate": 16_000,
         "ttsSampleRate": 24_000, "protocolVersion": 1, "mode": "text", "llm": "offline",
         "notice": NOTICE},
    ),
    (protocol.GreetingEvent(text="Hi!"), {"type": "greeting", "text": "Hi!"}),
    (protocol.TranscriptEvent(text="wha"), {"type": "transcript", "text": "wha", "final": False}),
    (protocol.TurnEvent(text="what time"), {"type": "turn", "text": "what time"}),
    (protocol.ThinkingEvent(), {"type": "thinking"}),
    (protocol.ChatDeltaEvent(text="It is "), {"type": "chat_delta", "text": "It is "}),
    (
        protocol.ChatEvent(text="It is 21 °C.", steps=["Using get_weather"]),
        {"type": "chat", "text": "It is 21 °C.", "steps": ["Using get_weather"]},
    ),
    (
        protocol.ToolCallEvent(call_id="c1", name="open_file", arguments={"path": "a.py"}),
        {"type": "tool_call", "callId": "c1", "name": "open_file", "arguments": {"path": "a.py"}},
    ),
    (
        protocol.ToolStatusEvent(call_id="c1", name="get_weather", status="timed_out"),
        {"type": "tool_status", "callId": "c1", "name": "get_weather", "status": "timed_out"},
    ),
    (protocol.TtsDoneEvent(), {"type": "tts_done"}),
    (protocol.CancelledEvent(reason="barge_in"), {"type": "cancelled", "reason": "barge_in"}),
    (
        protocol.MetricsEvent(
            turn_id=2, source="speech", outcome="completed", end_of_utterance_ms=400.0,
            stt_final_ms=12.5, llm_first_token_ms=230.1, tts_first_byte_ms=None,
            first_audio_ms=None, turn_ms=910.0, llm_rounds=2,
            tools=METRICS_WIRE["tools"], timeline=METRICS_WIRE["timeline"],
            llm=METRICS_WIRE["llm"], tts=None, usage=METRICS_WIRE["usage"],
        ),
        {"type": "metrics", **METRICS_WIRE},
    ),
    (protocol.ResetEvent(), {"type": "reset"}),
    (protocol.PongEvent(), {"type": "pong"}),
    (protocol.PongEvent(t=0), {"type": "pong", "t": 0}),
    (protocol.ReconnectEvent(), {"type": "reconnect"}),
    (
        protocol.ErrorEvent(code=protocol.ErrorCode.LLM_FAILED, message="the model timed out"),
        {"type": "error", "code": "llm_failed", "message": "the model timed out"},
    ),
]  # fmt: skip


def test_every_server_event_type_has_its_wire_shape_checked() -> None:
    assert {type(event) for event, _ in WIRE_SHAPES} == set(protocol.SERVER_EVENTS.values())
    assert {event.TYPE for event in protocol.SERVER_EVENTS.values()} == set(protocol.SERVER_EVENTS)


@pytest.mark.parametrize(("event", "wire"), WIRE_SHAPES, ids=lambda x: getattr(x, "TYPE", ""))
def test_server_events_round_trip_to_the_wire_shape(
    event: protocol.ServerEvent, wire: dict[str, Any]
) -> None:
    sent = event.to_wire(seq=9, ts=1_700_000_000_123)
    assert sent == {**wire, "seq": 9, "ts": 1_700_000_000_123}
    assert list(sent)[:3] == ["type", "seq", "ts"]
    assert protocol.event_from_wire(sent) == event
    assert json.loads(protocol.V1Codec().encode(sent)) == sent


def test_error_codes_go_out_as_plain_strings() -> None:
    event = protocol.ErrorEvent(code=protocol.ErrorCode.BAD_JSON, message="x")
    assert type(event.data()["code"]) is str
    assert protocol.V1Codec().encode(event.to_wire(seq=1, ts=0)) == (
        '{"type":"error","seq":1,"ts":0,"code":"bad_json","message":"x"}'
    )


def test_a_code_outside_the_enum_cannot_be_emitted() -> None:
    with pytest.raises(ValueError, match="made_up"):
        protocol.ErrorEvent(code="made_up", message="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="made_up"):
        ProviderError("the vendor said no", code="made_up")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="made_up"):
        ProtocolError("made_up", "x")  # type: ignore[arg-type]


async def test_a_session_sends_no_error_with_an_unknown_code(
    make: Callable[..., Harness],
) -> None:
    harness = await started(make)
    await harness.session.handle_error("made_up", "x")  # type: ignore[arg-type]
    await harness.session.handle_error(protocol.ErrorCode.INTERNAL, "internal error")
    assert [event["code"] for event in harness.of_type("error")] == ["internal"]


def test_unknown_server_events_and_fields_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown server event type"):
        protocol.event_from_wire({"type": "tool_result", "seq": 1, "ts": 0})
    with pytest.raises(ValueError, match="has no field 'colour'"):
        protocol.event_from_wire({"type": "turn", "seq": 1, "ts": 0, "text": "x", "colour": 1})


async def test_everything_a_session_emits_is_a_registered_event(
    make: Callable[..., Harness],
) -> None:
    """Emitters build typed events: each wire dict decodes and re-encodes unchanged."""
    weather = ToolDefinition(name="get_weather", handler="async () => ({temp: 21})")
    open_file = ToolDefinition(name="open_file", client=True)
    llm = FakeLLM(
        script=[
            [tool_call("get_weather", {}), tool_call("open_file", {}, id="c9")],
            ["It is ", "warm."],
        ]
    )
    stt = FakeSTT(texts=["how warm is it"], silence_ms=100, partial_every_ms=40)
    harness = await started(
        make, mode="voice", llm=llm, stt=stt, tools=[weather, open_file], greeting="Hello."
    )
    await harness.speak(speech_ms=200, silence_ms=200)
    await harness.wait_for("tool_call")
    await harness.session.handle(protocol.ToolResultMessage(call_id="c9", result="ok"))
    await harness.wait_for("metrics")
    await harness.session.handle(protocol.PingMessage(t=5))
    await harness.session.handle(protocol.ResetMessage())
    await harness.session.handle(protocol.CancelMessage())
    await harness.session.handle_error(protocol.ErrorCode.INTERNAL, "internal error")
    await harness.session.ask_to_reconnect()

    kinds = {event["type"] for event in harness.events}
    assert kinds == set(protocol.SERVER_EVENTS), set(protocol.SERVER_EVENTS) - kinds
    for event in harness.events:
        typed = protocol.event_from_wire(event)
        assert typed.to_wire(seq=event["seq"], ts=event["ts"]) == event


# ---------------------------------------------------------------- error codes


def _documented_error_code_table() -> set[str]:
    lines = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text().splitlines()
    start = lines.index("## Error codes")
    header = next(i for i in range(start, len(lines)) if lines[i].startswith("| Error code |"))
    codes: set[str] = set()
    for line in itertools.takewhile(lambda row: row.startswith("|"), lines[header + 2 :]):
        codes.update(re.findall(r"`([a-z_]+)`", line.split("|")[1]))
    return codes


def test_the_documented_error_code_table_lists_exactly_the_codes_sent() -> None:
    assert _documented_error_code_table() == {code.value for code in protocol.ErrorCode}


def test_metrics_count_every_error_code_under_its_own_label() -> None:
    for code in protocol.ErrorCode:
        labels = {"code": code.value}
        before = metrics.REGISTRY.get_sample_value("voice_errors_total", labels) or 0.0
        event = protocol.ErrorEvent(code=code, message="x")
        metrics.observe_event(event)
        assert metrics.REGISTRY.get_sample_value("voice_errors_total", labels) == before + 1
