from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from engine import protocol
from engine.protocol import PROVIDER_FAILURES
from engine.providers.base import PartialTranscript, ProviderError, SpeechStarted, ToolCall
from engine.session import (
    DEFAULT_EMPTY_REPLY,
    INTERRUPTED_MARK,
    TOOLS_EXHAUSTED_NOTE,
    ToolDefinition,
)
from tests.engine.providers.fake import (
    Delay,
    FakeLLM,
    FakeSTT,
    FakeToolRunner,
    FakeTTS,
    tone_pcm,
    tool_call,
)
from tests.sessions_app.harness import Harness, started, until

WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    handler="async (args) => ({temp: 21})",
)
OPEN_FILE = ToolDefinition(
    name="open_file",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    client=True,
)


def last_request_messages(llm: FakeLLM) -> list[dict[str, Any]]:
    return llm.requests[-1].messages


# ---------------------------------------------------------------- basics


async def test_ready_announces_the_session(make: Callable[..., Harness]) -> None:
    harness = await started(make, mode="voice", tts_sample_rate=22050)
    ready = harness.events[0]
    assert ready["type"] == "ready"
    assert {k: v for k, v in ready.items() if k not in ("seq", "ts", "type")} == {
        "sessionId": "s1",
        "resumeToken": "r1",
        "sampleRate": 16000,
        "ttsSampleRate": 22050,
        "protocolVersion": 1,
        "mode": "voice",
        "llm": "fake",
    }


async def test_text_turn_event_order_and_seq(make: Callable[..., Harness]) -> None:
    harness = await started(make, llm=FakeLLM(script=[["Hello ", "there."]]))
    await harness.say("hi")
    await harness.wait_for("chat")
    await asyncio.sleep(0.02)
    assert harness.types == ["ready", "turn", "thinking", "chat_delta", "chat_delta", "chat"]
    assert harness.events[-1]["type"] == "metrics"  # after the turn, in the same sequence
    assert [e["seq"] for e in harness.events] == list(range(1, 8))
    assert all(isinstance(e["ts"], int) and e["ts"] > 1_600_000_000_000 for e in harness.events)
    assert harness.of_type("turn")[0]["text"] == "hi"
    assert [e["text"] for e in harness.of_type("chat_delta")] == ["Hello ", "there."]
    chat = harness.of_type("chat")[0]
    assert (chat["text"], chat["steps"]) == ("Hello there.", [])
    assert harness.audio == []  # text mode never speaks
    assert harness.session.history == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello there."},
    ]


async def test_seq_continues_after_events_sent_before_the_session(
    make: Callable[..., Harness],
) -> None:
    harness = await started(make, first_seq=2)
    await harness.session.handle(protocol.PingMessage())
    assert [e["seq"] for e in harness.events] == [3, 4]
    assert harness.session.last_seq == 4


async def test_ping_and_protocol_errors_keep_the_session_usable(
    make: Callable[..., Harness],
) -> None:
    harness = await started(make, llm=FakeLLM(script=["ok"]))
    await harness.session.handle(protocol.PingMessage(t=42))
    await harness.session.handle(protocol.ConfigureMessage(mode="voice"))
    await harness.session.handle(
        protocol.ResumeMessage(session_id="s1", resume_token="r1", last_seq=0)
    )
    await harness.session.handle_error("unknown_type", "unknown message type")
    assert harness.of_type("pong")[0]["t"] == 42
    codes = [e["code"] for e in harness.of_type("error")]
    assert codes == ["already_configured", "resume_unavailable", "unknown_type"]
    await harness.say("still there?")
    await harness.wait_for("chat")
    assert [e["seq"] for e in harness.events] == list(range(1, len(harness.events) + 1))


async def test_audio_in_text_mode_is_refused_once(make: Callable[..., Harness]) -> None:
    harness = await started(make)
    for _ in range(5):
        await harness.session.push_audio(tone_pcm(20))
    assert [e["code"] for e in harness.of_type("error")] == ["not_voice_mode"]
    assert harness.stt.streams == []


async def test_greeting_in_text_mode(make: Callable[..., Harness]) -> None:
    harness = await started(make, greeting="Hi {{name}}!", variables={"name": "Ada"})
    assert harness.types == ["ready", "greeting"]
    assert harness.of_type("greeting")[0]["text"] == "Hi Ada!"
    assert harness.session.history == [{"role": "assistant", "content": "Hi Ada!"}]


async def test_greeting_is_spoken_in_voice_mode(make: Callable[..., Harness]) -> None:
    harness = await started(make, mode="voice", greeting="Welcome back. How can I help?")
    await harness.wait_for("tts_done")
    assert harness.tts.requests == [("Welcome back.", None), ("How can I help?", None)]
    assert harness.timeline[:3] == ["ready", "greeting", "audio"]
    assert harness.timeline[-1] == "tts_done"


# ---------------------------------------------------------------- instructions and context


async def test_variables_fill_instructions_and_context_updates_them_without_a_reply(
    make: Callable[..., Harness],
) -> None:
    harness = await started(
        make,
        instructions="Help {{ name }} with {{topic}}.{{missing}}",
        variables={"name": "Ada", "topic": "maths"},
    )
    await harness.say("hi")
    await harness.wait_for("chat")
    assert last_request_messages(harness.llm)[0] == {
        "role": "system",
        "content": "Help Ada with maths.",
    }
    before = len(harness.events)
    await harness.session.handle(
        protocol.ContextMessage(variables={"topic": "physics"}, text="User opened page 2")
    )
    await asyncio.sleep(0.05)
    assert len(harness.events) == before  # no reply, no event
    assert len(harness.llm.requests) == 1
    await harness.say("next")
    await harness.wait_for("chat", 2)
    messages = last_request_messages(harness.llm)
    assert messages[0]["content"] == "Help Ada with physics."
    assert messages[-2:] == [
        {"role": "system", "content": "Context update: User opened page 2"},
        {"role": "user", "content": "next"},
    ]


async def test_context_cannot_grow_variables_without_bound(make: Callable[..., Harness]) -> None:
    harness = await started(make, instructions="{{v0}}{{v70}}", variables={"v0": "a"})
    await harness.session.handle(
        protocol.ContextMessage(variables={f"v{i}": "x" for i in range(1, 64)})
    )
    assert harness.of_type("error") == []
    await harness.session.handle(protocol.ContextMessage(variables={"v70": "b"}, text="note"))
    assert [e["code"] for e in harness.of_type("error")] == ["invalid"]
    await harness.say("hi")
    await harness.wait_for("chat")
    assert last_request_messages(harness.llm)[0]["content"] == "a"  # the update was refused
    assert all(m["content"] != "Context update: note" for m in harness.session.history)


# ---------------------------------------------------------------- server tools


async def test_server_tool_round_trip(make: Callable[..., Harness]) -> None:
    llm = FakeLLM(
        script=[
            ["Let me check. ", tool_call("get_weather", {"city": "Paris"}, id="call_1")],
            ["It is 21 degrees."],
        ]
    )
    runner = FakeToolRunner(handlers={"get_weather": lambda args: {"temp": 21}})
    harness = await started(make, llm=llm, runner=runner, tools=[WEATHER])
    await harness.say("weather in Paris?")
    await harness.wait_for("chat")

    (invocation,) = runner.invocations
    assert (invocation.name, invocation.arguments) == ("get_weather", {"city": "Paris"})
    assert (invocation.session_id, invocation.workspace_id) == ("s1", 7)
    assert invocation.handler == WEATHER.handler
    assert [t.name for t in llm.requests[0].tools] == ["get_weather"]
    assert llm.requests[1].messages[-2:] == [
        {
            "role": "assistant",
            "content": "Let me check. ",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
    ]
    statuses = [(e["callId"], e["name"], e["status"]) for e in harness.of_type("tool_status")]
    assert statuses == [
        ("call_1", "get_weather", "started"),
        ("call_1", "get_weather", "completed"),
    ]
    assert harness.of_type("tool_call") == []  # server tools never go to the browser
    chat = harness.of_type("chat")[0]
    assert chat == {
        **chat,
        "text": "Let me check. It is 21 degrees.",
        "steps": ["Using get_weather"],
    }


@pytest.mark.parametrize(
    ("call", "expected_error"),
    [
        (tool_call("get_weather", {"city": 5}), "invalid arguments"),
        (tool_call("get_weather", {"city": "Rome", "units": "C"}), "unexpected argument"),
        (tool_call("get_weather", '{"city": '), "not valid JSON"),
        (tool_call("get_weather", "[1, 2]"), "must be a JSON object"),
        (tool_call("launch_rockets", {}), "unknown tool 'launch_rockets'"),
    ],
)
async def test_invalid_calls_never_reach_the_runner(
    make: Callable[..., Harness], call: ToolCall, expected_error: str
) -> None:
    llm = FakeLLM(script=[[call], ["Sorry."]])
    harness = await started(make, llm=llm, tools=[WEATHER])
    await harness.say("go")
    await harness.wait_for("chat")
    assert harness.runner.invocations == []
    tool_message = llm.requests[1].messages[-1]
    assert tool_message["role"] == "tool"
    assert expected_error in json.loads(tool_message["content"])["error"]
    assert [e["status"] for e in harness.of_type("tool_status")] == ["started", "failed"]


async def test_parallel_tool_calls_run_concurrently(make: Callable[..., Harness]) -> None:
    calls = [tool_call("get_weather", {"city": c}, id=f"c_{c}") for c in ("Oslo", "Rome", "Lima")]
    llm = FakeLLM(script=[calls, ["Done."]])
    runner = FakeToolRunner(
        handlers={"get_weather": lambda args: {"city": args["city"]}}, delay=0.2
    )
    harness = await started(make, llm=llm, runner=runner, tools=[WEATHER])
    began = time.monotonic()
    await harness.say("three cities")
    await harness.wait_for("chat")
    assert time.monotonic() - began < 0.5  # three 0.2 s tools, not 0.6 s
    assert runner.max_running == 3
    tool_messages = [m for m in llm.requests[1].messages if m["role"] == "tool"]
    assert [(m["tool_call_id"], json.loads(m["content"])) for m in tool_messages] == [
        ("c_Oslo", {"city": "Oslo"}),
        ("c_Rome", {"city": "Rome"}),
        ("c_Lima", {"city": "Lima"}),
    ]


async def test_a_turns_tool_results_fill_at_most_half_a_request(
    make: Callable[..., Harness],
) -> None:
    calls = [tool_call("get_weather", {"city": c}, id=f"c_{c}") for c in ("Oslo", "Rome", "Lima")]
    llm = FakeLLM(script=[calls, ["Done."]])
    runner = FakeToolRunner(handlers={"get_weather": lambda args: {"text": "x" * 8000}})
    harness = await started(
        make, llm=llm, runner=runner, tools=[WEATHER], llm_request_max_bytes=40_000
    )
    await harness.say("three big answers")
    await harness.wait_for("chat")
    results = [m["content"] for m in llm.requests[1].messages if m["role"] == "tool"]
    assert sum(len(r.encode()) for r in results) <= 20_000 + 200  # + a short note when full
    assert [json.loads(r) for r in results[:2]] == [{"text": "x" * 8000}] * 2  # the first whole
    cut = json.loads(results[-1])
    assert cut["truncated"] is True and "fill the request budget" in cut["error"]


async def test_failing_server_tool_reports_failure_to_the_llm(
    make: Callable[..., Harness],
) -> None:
    def broken(args: dict[str, Any]) -> Any:
        raise RuntimeError("upstream 503")

    llm = FakeLLM(script=[[tool_call("get_weather", {"city": "Oslo"})], ["Sorry."]])
    runner = FakeToolRunner(handlers={"get_weather": broken})
    harness = await started(make, llm=llm, runner=runner, tools=[WEATHER])
    await harness.say("weather?")
    await harness.wait_for("chat")
    assert json.loads(llm.requests[1].messages[-1]["content"]) == {"error": "upstream 503"}
    assert harness.of_type("tool_status")[-1]["status"] == "failed"


async def test_repeated_call_ids_are_made_unique(make: Callable[..., Harness]) -> None:
    llm = FakeLLM(
        script=[
            [tool_call("open_file", {"path": "a"}, id="0")],
            [tool_call("open_file", {"path": "b"}, id="0")],
            ["Both open."],
        ]
    )
    harness = await started(make, llm=llm, tools=[OPEN_FILE])
    await harness.say("open two")
    for count in (1, 2):
        await harness.wait_for("tool_call", count)
        call = harness.of_type("tool_call")[-1]
        await harness.session.resolve_tool_result(call["callId"], {"ok": True}, None)
    await harness.wait_for("chat")
    assert [e["callId"] for e in harness.of_type("tool_call")] == ["0", "0_2"]


# ---------------------------------------------------------------- client tools


async def test_client_tool_round_trip(make: Callable[..., Harness]) -> None:
    llm = FakeLLM(script=[[tool_call("open_file", {"path": "main.py"}, id="c1")], ["Opened."]])
    harness = await started(make, llm=llm, tools=[OPEN_FILE])
    await harness.say("open main")
    await harness.wait_for("tool_call")
    call = harness.of_type("tool_call")[0]
    assert {k: call[k] for k in ("callId", "name", "arguments")} == {
        "callId": "c1",
        "name": "open_file",
        "arguments": {"path": "main.py"},
    }
    assert len(llm.requests) == 1  # waiting for the browser
    await harness.session.handle(protocol.ToolResultMessage(call_id="c1", result={"lines": 120}))
    await harness.wait_for("chat")
    assert llm.requests[1].messages[-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": '{"lines": 120}',
    }
    assert [e["status"] for e in harness.of_type("tool_status")] == ["started", "completed"]
    assert harness.runner.invocations == []


async def test_client_tool_error_goes_to_the_llm(make: Callable[..., Harness]) -> None:
    llm = FakeLLM(script=[[tool_call("open_file", {"path": "x"}, id="c1")], ["No luck."]])
    harness = await started(make, llm=llm, tools=[OPEN_FILE])
    await harness.say("open x")
    await harness.wait_for("tool_call")
    await harness.session.handle(protocol.ToolResultMessage(call_id="c1", error="no such file"))
    await harness.wait_for("chat")
    assert json.loads(llm.requests[1].messages[-1]["content"]) == {"error": "no such file"}
    assert harness.of_type("tool_status")[-1]["status"] == "failed"


async def test_client_tool_timeout_then_late_result(make: Callable[..., Harness]) -> None:
    slow = ToolDefinition(name="open_file", client=True, timeout_s=0.1)
    llm = FakeLLM(script=[[tool_call("open_file", {}, id="c1")], ["It did not answer."], ["ok"]])
    harness = await started(make, llm=llm, tools=[slow])
    began = time.monotonic()
    await harness.say("open")
    await harness.wait_for("chat")
    assert 0.09 < time.monotonic() - began < 1.0
    assert json.loads(llm.requests[1].messages[-1]["content"]) == {"error": "timed out after 0.1 s"}
    assert [e["status"] for e in harness.of_type("tool_status")] == ["started", "timed_out"]

    await harness.session.handle(protocol.ToolResultMessage(call_id="c1", result="late"))
    await harness.session.handle(protocol.ToolResultMessage(call_id="never", result=1))
    assert [e["code"] for e in harness.of_type("error")] == ["unknown_tool_call"] * 2
    await harness.say("still fine?")
    await harness.wait_for("chat", 2)


async def test_client_tool_default_timeout_comes_from_the_session(
    make: Callable[..., Harness],
) -> None:
    llm = FakeLLM(script=[[tool_call("open_file", {"path": "a"})], ["ok"]])
    harness = await started(make, llm=llm, tools=[OPEN_FILE], client_tool_timeout=0.05)
    await harness.say("open")
    await harness.wait_for("chat", within=1.0)
    assert harness.of_type("tool_status")[-1]["status"] == "timed_out"


# ---------------------------------------------------------------- limits and failures


async def test_max_tool_steps_limits_llm_rounds(make: Callable[..., Harness]) -> None:
    always_tools = [["Checking. ", tool_call("get_weather", {"city": "Oslo"})]] * 6
    llm = FakeLLM(script=always_tools)
    harness = await started(make, llm=llm, tools=[WEATHER], max_tool_steps=3)
    await harness.say("loop forever")
    await harness.wait_for("chat")
    await asyncio.sleep(0.05)
    assert len(llm.requests) == 3
    assert len(harness.runner.invocations) == 2
    assert llm.requests[-1].tools == []
    assert llm.requests[-1].messages[-1] == {"role": "system", "content": TOOLS_EXHAUSTED_NOTE}
    assert harness.of_type("chat")[0]["steps"] == ["Using get_weather"] * 2
    assert harness.metrics[0].llm_rounds == 3


async def test_llm_failure_then_next_turn_works(make: Callable[..., Harness]) -> None:
    llm = FakeLLM(
        script=[
            ["Part", ProviderError("upstream returned HTTP 500", code="llm_failed")],
            ["Recovered."],
        ]
    )
    harness = await started(make, llm=llm)
    await harness.say("first")
    await harness.wait_for("error")
    error = harness.of_type("error")[0]
    assert (error["code"], error["message"]) == ("llm_failed", PROVIDER_FAILURES["llm_failed"])
    assert harness.provider_errors == [("llm_failed", "upstream returned HTTP 500")]
    assert harness.of_type("chat") == []
    assert harness.metrics[0].outcome == "failed"
    await harness.say("second")
    await harness.wait_for("chat")
    assert harness.of_type("chat")[0]["text"] == "Recovered."
    assert llm.requests[1].messages[-1] == {"role": "user", "content": "second"}


async def test_unexpected_exception_is_reported_without_content(
    make: Callable[..., Harness], caplog: pytest.LogCaptureFixture
) -> None:
    llm = FakeLLM(script=[[RuntimeError("secret transcript words")], ["Fine again."]])
    harness = await started(make, llm=llm)
    with caplog.at_level(logging.ERROR):
        await harness.say("my private question")
        await harness.wait_for("error")
    assert harness.of_type("error")[0]["code"] == "internal"
    assert "RuntimeError" in caplog.text
    assert "secret transcript words" not in caplog.text
    assert "my private question" not in caplog.text
    await harness.say("again")
    await harness.wait_for("chat")


async def test_tts_failure_is_reported_and_the_turn_still_ends(
    make: Callable[..., Harness],
) -> None:
    tts = FakeTTS(error=ProviderError("voice service down", code="tts_failed"))
    harness = await started(make, mode="voice", tts=tts, llm=FakeLLM(script=["One. Two."]))
    await harness.say("talk")
    await harness.wait_for("tts_done")
    assert [e["code"] for e in harness.of_type("error")] == ["tts_failed"]  # once, not per sentence
    assert harness.of_type("chat")[0]["text"] == "One. Two."
    assert harness.audio == []


async def test_stt_failure_is_reported(make: Callable[..., Harness]) -> None:
    harness = await started(make, mode="voice")
    harness.stt.streams[0].fail(ProviderError("socket closed", code="stt_failed"))
    await harness.wait_for("error")
    assert harness.of_type("error")[0]["code"] == "stt_failed"
    await harness.speak()  # audio after the failure is dropped quietly
    assert len(harness.of_type("error")) == 1
    await harness.say("typing still works")
    await harness.wait_for("chat")


async def test_stt_open_failure_is_reported(make: Callable[..., Harness]) -> None:
    stt = FakeSTT(open_error=ProviderError("bad key", code="stt_failed"))
    harness = await started(make, mode="voice", stt=stt)
    assert [(e["code"], e["message"]) for e in harness.of_type("error")] == [
        ("stt_failed", PROVIDER_FAILURES["stt_failed"])
    ]
    assert harness.provider_errors == [("stt_failed", "bad key")]


# ---------------------------------------------------------------- cancel, reset, new turns


async def test_cancel_during_streaming(make: Callable[..., Harness]) -> None:
    llm = FakeLLM(script=[["One. ", Delay(5), "Two."]])
    harness = await started(make, llm=llm)
    await harness.say("count")
    await harness.wait_for("chat_delta")
    began = time.monotonic()
    await harness.session.handle(protocol.CancelMessage())
    assert time.monotonic() - began < 0.5
    await asyncio.sleep(0.05)
    assert harness.types[-2:] == ["chat_delta", "cancelled"]
    assert harness.of_type("chat") == []
    assert harness.session.history[-1] == {
        "role": "assistant",
        "content": f"One. {INTERRUPTED_MARK}",
    }
    assert harness.metrics[0].outcome == "cancelled"


async def test_cancel_without_a_turn_is_acknowledged(make: Callable[..., Harness]) -> None:
    harness = await started(make)
    await harness.session.handle(protocol.CancelMessage(played_ms=0))
    assert harness.types == ["ready", "cancelled"]


async def test_new_turn_cancels_the_running_one(make: Callable[..., Harness]) -> None:
    llm = FakeLLM(script=[["Long ", Delay(5), "answer."], ["Short."]])
    harness = await started(make, llm=llm)
    await harness.say("first")
    await harness.wait_for("chat_delta")
    await harness.say("second")
    await harness.wait_for("chat")
    assert harness.types[3:] == [
        "chat_delta",
        "cancelled",
        "turn",
        "thinking",
        "chat_delta",
        "chat",
    ]
    assert [m["role"] for m in llm.requests[1].messages] == ["user", "assistant", "user"]
    assert llm.requests[1].messages[1]["content"] == f"Long {INTERRUPTED_MARK}"


async def test_cancel_while_a_server_tool_runs_keeps_its_result(
    make: Callable[..., Harness],
) -> None:
    llm = FakeLLM(script=[[tool_call("get_weather", {"city": "Oslo"}, id="c1")], ["never"]])
    runner = FakeToolRunner(handlers={"get_weather": lambda args: {"temp": -3}}, delay=0.2)
    harness = await started(make, llm=llm, runner=runner, tools=[WEATHER])
    await harness.say("weather")
    await harness.wait_for("tool_status")
    await harness.session.cancel()
    assert harness.types[-1] == "cancelled"
    await until(lambda: runner.finished == ["c1"])
    await harness.wait_for("tool_status", 2)
    assert harness.of_type("tool_status")[-1]["status"] == "completed"
    tool_message = harness.session.history[-1]
    assert tool_message == {"role": "tool", "tool_call_id": "c1", "content": '{"temp": -3}'}
    assert len(llm.requests) == 1  # the cancelled turn asked the LLM nothing more


async def test_tool_finished_before_cancel_keeps_its_result(make: Callable[..., Harness]) -> None:
    llm = FakeLLM(
        script=[
            [tool_call("get_weather", {"city": "Oslo"}, id="c1")],
            ["It is ", Delay(5), "cold."],
            ["Anything else?"],
        ]
    )
    runner = FakeToolRunner(handlers={"get_weather": lambda args: {"temp": -3}})
    harness = await started(make, llm=llm, runner=runner, tools=[WEATHER])
    await harness.say("weather")
    await harness.wait_for("chat_delta")
    await harness.session.cancel()
    await harness.say("thanks")
    await harness.wait_for("chat")
    roles = [(m["role"], m.get("content")) for m in llm.requests[-1].messages]
    assert roles == [
        ("user", "weather"),
        ("assistant", None),
        ("tool", '{"temp": -3}'),
        ("assistant", f"It is {INTERRUPTED_MARK}"),
        ("user", "thanks"),
    ]


async def test_cancel_while_waiting_for_a_client_tool(make: Callable[..., Harness]) -> None:
    llm = FakeLLM(script=[[tool_call("open_file", {"path": "a"}, id="c1")], ["ok"]])
    harness = await started(make, llm=llm, tools=[OPEN_FILE])
    await harness.say("open")
    await harness.wait_for("tool_call")
    await harness.session.cancel()
    assert harness.types[-2:] == ["cancelled", "tool_status"]
    assert harness.of_type("tool_status")[-1]["status"] == "cancelled"
    assert json.loads(harness.session.history[-1]["content"])["error"].startswith("cancelled")
    await harness.session.resolve_tool_result("c1", {"ok": True}, None)
    assert harness.of_type("error")[-1]["code"] == "unknown_tool_call"


async def test_reset_clears_history(make: Callable[..., Harness]) -> None:
    harness = await started(make, instructions="Be kind.")
    await harness.say("remember 42")
    await harness.wait_for("chat")
    await harness.session.handle(protocol.ResetMessage())
    assert harness.types[-1] == "reset"
    assert harness.session.history == []
    await harness.say("what number?")
    await harness.wait_for("chat", 2)
    assert last_request_messages(harness.llm) == [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "what number?"},
    ]


async def test_reset_during_a_turn_cancels_it(make: Callable[..., Harness]) -> None:
    harness = await started(make, llm=FakeLLM(script=[["Long ", Delay(5), "story."]]))
    await harness.say("tell me")
    await harness.wait_for("chat_delta")
    await harness.session.reset()
    assert harness.types[-2:] == ["cancelled", "reset"]
    assert harness.session.history == []


# ---------------------------------------------------------------- voice


async def test_voice_turn_end_to_end(make: Callable[..., Harness]) -> None:
    stt = FakeSTT(texts=["what is the weather like"], silence_ms=100, partial_every_ms=40)
    llm = FakeLLM(script=[["Sunny today. ", Delay(0.3), "Warm tomorrow."]])
    harness = await started(make, mode="voice", stt=stt, llm=llm, voice="tara")
    await harness.speak(speech_ms=200, silence_ms=200)
    await harness.wait_for("tts_done")

    partials = harness.of_type("transcript")
    assert partials and all(p["final"] is False for p in partials)
    assert partials[0]["text"] == "what"
    assert harness.of_type("turn")[0]["text"] == "what is the weather like"
    timeline = harness.timeline
    assert timeline.index("transcript") < timeline.index("turn") < timeline.index("thinking")
    first_audio = timeline.index("audio")
    second_delta = next(
        i for i, e in enumerate(harness.events) if e.get("text") == "Warm tomorrow."
    )
    # the first sentence is heard while the LLM is still writing the second
    assert first_audio < harness.timeline.index("chat_delta", second_delta)
    assert first_audio < timeline.index("chat")
    assert timeline[-1] == "tts_done" and timeline.count("tts_done") == 1
    assert timeline.index("chat") < timeline.index("tts_done")
    assert harness.tts.requests == [("Sunny today.", "tara"), ("Warm tomorrow.", "tara")]
    expected = harness.tts.audio_for("Sunny today.") + harness.tts.audio_for("Warm tomorrow.")
    assert b"".join(harness.audio) == expected

    (metrics,) = harness.metrics
    assert metrics.source == "speech" and metrics.outcome == "completed"
    stamps = [
        metrics.input_at,
        metrics.llm_request_at,
        metrics.first_llm_text_at,
        metrics.first_tts_request_at,
        metrics.first_audio_at,
        metrics.end_at,
    ]
    assert all(s is not None for s in stamps)
    assert stamps == sorted(stamps)  # type: ignore[type-var]


async def test_speech_skips_sentences_that_clean_to_nothing(make: Callable[..., Harness]) -> None:
    llm = FakeLLM(script=[["Here:\n```\nprint(1)\n```\nDone."]])
    harness = await started(make, mode="voice", llm=llm)
    await harness.say("code please")
    await harness.wait_for("tts_done")
    assert [text for text, _ in harness.tts.requests] == ["Here:", "Done."]


async def test_barge_in_while_speaking(make: Callable[..., Harness]) -> None:
    stt = FakeSTT(silence_ms=100)
    tts = FakeTTS(chunks=10, chunk_delay=0.05)
    # The LLM has written two sentences while the first one is still being spoken.
    llm = FakeLLM(script=[["First sentence here. ", "Second one. ", Delay(5), "Third."]])
    harness = await started(make, mode="voice", stt=stt, tts=tts, llm=llm, barge_in_min_words=0)
    await harness.say("talk to me")
    await until(lambda: "audio" in harness.timeline)
    await harness.session.push_audio(tone_pcm(20))  # the user starts talking
    await harness.wait_for("cancelled")
    audio_sent = len(harness.audio)
    await asyncio.sleep(0.3)
    assert len(harness.audio) == audio_sent  # nothing after the interruption
    assert harness.of_type("cancelled")[0]["reason"] == "barge_in"
    assert "audio" not in harness.timeline[harness.timeline.index("cancelled") :]
    assert harness.of_type("chat") == [] and harness.of_type("tts_done") == []
    assert harness.session.history[-1] == {
        "role": "assistant",
        "content": f"First sentence here. {INTERRUPTED_MARK}",
    }


async def test_speech_while_thinking_is_not_a_barge_in(make: Callable[..., Harness]) -> None:
    llm = FakeLLM(script=[[Delay(0.2), "Answer."]])
    harness = await started(make, mode="voice", llm=llm)
    await harness.say("question")
    harness.stt.streams[0].inject(SpeechStarted())
    await harness.wait_for("tts_done")
    assert harness.of_type("cancelled") == []


async def test_cancel_with_played_ms_cuts_history_to_what_was_heard(
    make: Callable[..., Harness],
) -> None:
    tts = FakeTTS(ms_per_char=50)  # 15 characters = 750 ms of audio, sent at once
    llm = FakeLLM(script=[["First sentence. Second sentence."]])
    harness = await started(make, mode="voice", tts=tts, llm=llm)
    await harness.say("talk")
    await harness.wait_for("tts_done")  # all audio sent; the browser is still playing it
    await harness.session.handle(protocol.CancelMessage(played_ms=300))
    assert harness.types[-1] == "cancelled"
    assert harness.session.history[-1] == {
        "role": "assistant",
        "content": f"First sentence. {INTERRUPTED_MARK}",
    }


async def test_speech_after_playback_keeps_the_whole_reply(make: Callable[..., Harness]) -> None:
    tts = FakeTTS(ms_per_char=1)
    llm = FakeLLM(script=[["First sentence. Second sentence."]])
    harness = await started(make, mode="voice", tts=tts, llm=llm)
    await harness.say("talk")
    await harness.wait_for("tts_done")
    await asyncio.sleep(0.1)  # 32 ms of audio is long over
    harness.stt.streams[0].inject(SpeechStarted())
    await harness.session.handle(protocol.CancelMessage())
    await asyncio.sleep(0.02)
    assert [e.get("reason") for e in harness.of_type("cancelled")] == ["cancel"]
    assert harness.session.history[-1]["content"] == "First sentence. Second sentence."


async def test_client_cancel_after_a_barge_in_is_only_acknowledged(
    make: Callable[..., Harness],
) -> None:
    tts = FakeTTS(ms_per_char=50)
    llm = FakeLLM(script=[["First sentence. Second sentence."]])
    harness = await started(make, mode="voice", tts=tts, llm=llm)
    await harness.say("talk")
    await harness.wait_for("tts_done")
    harness.stt.streams[0].inject(PartialTranscript("wait a"))
    await harness.wait_for("cancelled")
    cut = harness.session.history[-1]["content"]
    assert cut == f"First sentence. {INTERRUPTED_MARK}"
    await harness.session.handle(protocol.CancelMessage(played_ms=10_000))
    assert [e["reason"] for e in harness.of_type("cancelled")] == ["barge_in", "cancel"]
    assert harness.session.history[-1]["content"] == cut


async def test_typed_turn_while_audio_still_plays_interrupts_it(
    make: Callable[..., Harness],
) -> None:
    tts = FakeTTS(ms_per_char=50)
    llm = FakeLLM(script=[["First sentence. Second sentence."], ["Ok."]])
    harness = await started(make, mode="voice", tts=tts, llm=llm)
    await harness.say("talk")
    await harness.wait_for("tts_done")
    await harness.say("stop, another question")
    await harness.wait_for("tts_done", 2)
    after_first = harness.types[harness.types.index("tts_done") + 1 :]
    assert after_first[:3] == ["cancelled", "turn", "thinking"]
    assert [m["content"] for m in llm.requests[1].messages] == [
        "talk",
        f"First sentence. {INTERRUPTED_MARK}",
        "stop, another question",
    ]


async def test_turn_and_thinking_come_first_even_when_sending_is_slow(
    make: Callable[..., Harness],
) -> None:
    harness = await started(make, llm=FakeLLM(script=[["A", "B", "C"]]), emit_delay=0.01)
    await harness.say("go")
    await harness.wait_for("chat")
    assert harness.types == ["ready", "turn", "thinking", *["chat_delta"] * 3, "chat"]
    assert [e["seq"] for e in harness.events] == list(range(1, 8))


async def test_text_turn_metrics(make: Callable[..., Harness]) -> None:
    harness = await started(make, llm=FakeLLM(script=[["Hi", Delay(0.05), " there."]]))
    await harness.say("hello")
    await harness.wait_for("chat")
    await until(lambda: len(harness.metrics) == 1)
    (metrics,) = harness.metrics
    assert (metrics.source, metrics.outcome, metrics.llm_rounds) == ("text", "completed", 1)
    assert metrics.input_to_llm_ms is not None and metrics.input_to_llm_ms >= 0
    assert metrics.end_at is not None and metrics.first_llm_text_at is not None
    assert metrics.end_at - metrics.first_llm_text_at >= 0.04
    assert metrics.first_tts_request_at is None and metrics.llm_text_to_tts_ms is None


# ---------------------------------------------------------------- close


async def test_close_leaves_no_tasks_behind(make: Callable[..., Harness]) -> None:
    llm = FakeLLM(
        script=[[tool_call("get_weather", {"city": "Oslo"}), tool_call("open_file", {"path": "a"})]]
    )
    runner = FakeToolRunner(delay=10)
    harness = await started(
        make, mode="voice", llm=llm, runner=runner, tools=[WEATHER, OPEN_FILE], greeting="Hi."
    )
    await harness.say("do both")
    await harness.wait_for("tool_call")
    assert len(asyncio.all_tasks()) > 1
    await harness.session.close()
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert harness.stt.streams[0].closed
    events = len(harness.events)
    await harness.say("anyone?")
    await harness.session.push_audio(tone_pcm(20))
    assert len(harness.events) == events  # a closed session is silent


# ---------------------------------------------------------------- speech details


async def test_an_empty_reply_says_the_fallback_sentence(make: Callable[..., Harness]) -> None:
    harness = await started(make, mode="voice", llm=FakeLLM(script=[[]]))
    await harness.session.handle(protocol.TextMessage(text="Hello?"))
    await harness.wait_for("tts_done")
    (chat,) = harness.of_type("chat")
    assert chat["text"] == DEFAULT_EMPTY_REPLY
    assert harness.tts.requests == [(DEFAULT_EMPTY_REPLY, None)]
    assert harness.audio  # heard, not silence
    assert harness.session.history[-1] == {"role": "assistant", "content": DEFAULT_EMPTY_REPLY}


async def test_the_fallback_sentence_is_the_agents_own(make: Callable[..., Harness]) -> None:
    harness = await started(make, llm=FakeLLM(script=[[" "]]), empty_reply="Hmm, no idea.")
    await harness.session.handle(protocol.TextMessage(text="Hello?"))
    await harness.wait_for("chat")
    assert harness.of_type("chat")[0]["text"] == "Hmm, no idea."
    assert harness.session.history[-1] == {"role": "assistant", "content": "Hmm, no idea."}
    assert [m["role"] for m in harness.session.history] == ["user", "assistant"]


async def test_a_voice_the_tts_lacks_is_an_error_and_the_default_speaks(
    make: Callable[..., Harness],
) -> None:
    tts = FakeTTS(voices=("joe",))
    harness = await started(make, mode="voice", tts=tts, voice="jess", greeting="Hi there.")
    await harness.wait_for("tts_done")
    assert harness.types[:3] == ["ready", "error", "greeting"]
    error = harness.of_type("error")[0]
    assert error["code"] == "voice_unavailable"
    assert "'jess'" in error["message"] and "joe" in error["message"]
    assert tts.requests == [("Hi there.", None)]


async def test_a_voice_the_tts_has_is_used_quietly(make: Callable[..., Harness]) -> None:
    tts = FakeTTS(voices=("joe", "tara"))
    harness = await started(make, mode="voice", tts=tts, voice="Tara", greeting="Hi.")
    await harness.wait_for("tts_done")
    assert "error" not in harness.types
    assert tts.requests == [("Hi.", "Tara")]
