"""The OpenAI-compatible adapter against a fake server speaking the real wire format."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.providers.base import (
    LLMDone,
    LLMEvent,
    ProviderError,
    TextDelta,
    ToolCall,
    ToolCallsRequested,
    ToolSpec,
)
from engine.providers.http_pool import close_shared_sessions
from engine.providers.llm.openai.adapter import OpenAICompatibleLLM
from tests.engine.providers.llm.openai.fake_server import (
    GATEWAY_ENVELOPE,
    OMIT,
    Chunk,
    Comment,
    Cut,
    Delay,
    Done,
    FakeOpenAIServer,
    Finish,
    HttpError,
    JsonBody,
    PlainBody,
    Raw,
    Text,
    ToolCallArgs,
    ToolCallStart,
    Usage,
    completion_body,
    text_reply,
    tool_call,
)

DEEP = b"[" * 5000 + b"]" * 5000
SECRET_PROMPT = "My card number is 4111 1111 1111 1111, what is the weather?"
MESSAGES = [
    {"role": "system", "content": "You are a helpful voice agent."},
    {"role": "user", "content": SECRET_PROMPT},
]
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as fake:
        try:
            yield fake
        finally:
            await close_shared_sessions()


async def collect(
    llm: OpenAICompatibleLLM,
    messages: list[dict[str, Any]] = MESSAGES,
    tools: list[ToolSpec] | None = None,
    model: str | None = None,
) -> list[LLMEvent]:
    return [event async for event in llm.stream(messages=messages, tools=tools or [], model=model)]


async def failure(llm: OpenAICompatibleLLM) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await collect(llm)
    assert caught.value.code == "llm_failed"
    assert "4111" not in str(caught.value)
    return caught.value


async def assert_next_call_works(server: FakeOpenAIServer, llm: OpenAICompatibleLLM) -> None:
    server.script(text_reply("still here"))
    assert await collect(llm) == [TextDelta("still here"), LLMDone("stop")]


# ---------------------------------------------------------------- happy paths


async def test_text_deltas_arrive_in_order_then_done_stop(server: FakeOpenAIServer) -> None:
    server.script(text_reply("It is ", "sunny ", "in Paris."))

    events = await collect(OpenAICompatibleLLM(server.base_url))

    # The opening role chunk's empty content must not surface as a delta.
    assert events == [
        TextDelta("It is "),
        TextDelta("sunny "),
        TextDelta("in Paris."),
        LLMDone("stop"),
    ]


async def test_request_names_model_messages_stream_and_usage(server: FakeOpenAIServer) -> None:
    server.script(text_reply("ok"))
    server.script(text_reply("ok"))
    llm = OpenAICompatibleLLM(server.base_url, model="default-model")

    await collect(llm)
    await collect(llm, model="agent-model")

    first, second = (request.json for request in server.requests)
    assert server.requests[0].path == "/v1/chat/completions"
    assert first["model"] == "default-model"
    assert second["model"] == "agent-model"
    assert first["messages"] == MESSAGES
    assert first["stream"] is True
    assert first["stream_options"] == {"include_usage": True}
    assert "tools" not in first  # OpenAI rejects an empty tools array


async def test_tools_are_serialised_in_openai_function_format(server: FakeOpenAIServer) -> None:
    server.script(text_reply("ok"))
    no_params = ToolSpec(name="hang_up", description="End the call.", parameters={})

    await collect(OpenAICompatibleLLM(server.base_url), tools=[WEATHER, no_params])

    assert server.requests[0].json["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": WEATHER.parameters,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "hang_up",
                "description": "End the call.",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]


@pytest.mark.parametrize(
    ("api_key", "expected"), [("sk-test-123", "Bearer sk-test-123"), (None, None), ("", None)]
)
async def test_bearer_header_only_with_an_api_key(
    server: FakeOpenAIServer, api_key: str | None, expected: str | None
) -> None:
    server.script(text_reply("ok"))

    await collect(OpenAICompatibleLLM(server.base_url, api_key=api_key))

    assert server.requests[0].headers.get("authorization") == expected


async def test_single_tool_call_is_assembled_from_argument_deltas(
    server: FakeOpenAIServer,
) -> None:
    server.script(
        tool_call(0, "call_abc", "get_weather", '{"ci', 'ty": "Pa', 'ris"}'),
        Finish("tool_calls"),
        Done(),
    )

    events = await collect(OpenAICompatibleLLM(server.base_url), tools=[WEATHER])

    assert events == [
        ToolCallsRequested(calls=(ToolCall("call_abc", "get_weather", '{"city": "Paris"}'),)),
        LLMDone("tool_calls"),
    ]


async def test_parallel_tool_calls_are_kept_apart_by_index(server: FakeOpenAIServer) -> None:
    server.script(
        Text("Let me check both."),
        ToolCallStart(0, "call_paris", "get_weather"),
        ToolCallStart(1, "call_rome", "get_weather"),
        ToolCallArgs(1, '{"city": '),
        ToolCallArgs(0, '{"city": '),
        ToolCallArgs(0, '"Paris"}'),
        ToolCallArgs(1, '"Rome"}'),
        Finish("tool_calls"),
        Done(),
    )

    events = await collect(OpenAICompatibleLLM(server.base_url), tools=[WEATHER])

    assert events == [
        TextDelta("Let me check both."),
        ToolCallsRequested(
            calls=(
                ToolCall("call_paris", "get_weather", '{"city": "Paris"}'),
                ToolCall("call_rome", "get_weather", '{"city": "Rome"}'),
            )
        ),
        LLMDone("tool_calls"),
    ]


async def test_tool_call_without_id_or_arguments_gets_defaults(server: FakeOpenAIServer) -> None:
    server.script(ToolCallStart(0, None, "hang_up"), Finish("tool_calls"), Done())

    events = await collect(OpenAICompatibleLLM(server.base_url))

    requested = events[0]
    assert isinstance(requested, ToolCallsRequested)
    (call,) = requested.calls
    assert call.name == "hang_up"
    assert call.arguments == "{}"
    assert call.id.startswith("call_")


async def test_usage_chunk_is_reported_on_done(server: FakeOpenAIServer) -> None:
    server.script(text_reply("Hi.", usage=Usage(prompt_tokens=42, completion_tokens=3)))

    events = await collect(OpenAICompatibleLLM(server.base_url))

    assert events[-1] == LLMDone(
        "stop", {"prompt_tokens": 42, "completion_tokens": 3, "total_tokens": 45}
    )


async def test_usage_comes_only_when_asked_for(server: FakeOpenAIServer) -> None:
    """As OpenAI does: no ``stream_options.include_usage`` (the gateway's requests), no usage."""
    server.script(text_reply("Hi.", usage=Usage(prompt_tokens=42, completion_tokens=3)))

    events = await collect(OpenAICompatibleLLM(server.base_url, flavor="assemblyai"))

    assert "stream_options" not in server.requests[0].json
    assert events[-1] == LLMDone("stop", {})


async def test_anthropic_usage_names_are_read_too(server: FakeOpenAIServer) -> None:
    usage = {"input_tokens": 30, "output_tokens": 7}
    server.script(Text("Hi."), Finish("stop"), Chunk({"choices": [], "usage": usage}), Done())

    events = await collect(OpenAICompatibleLLM(server.base_url))

    assert events[-1].usage["prompt_tokens"] == 30  # type: ignore[union-attr]
    assert events[-1].usage["completion_tokens"] == 7  # type: ignore[union-attr]


async def test_one_connection_pool_is_shared_across_instances(server: FakeOpenAIServer) -> None:
    for word in ("one", "two", "three"):
        server.script(text_reply(word))

    await collect(OpenAICompatibleLLM(server.base_url))
    await collect(OpenAICompatibleLLM(server.base_url, api_key="other-key"))
    await collect(OpenAICompatibleLLM(server.base_url + "/"))

    assert server.connections_opened == 1


# ---------------------------------------------------------------- SSE framing


async def test_sse_framing_variants_are_understood(server: FakeOpenAIServer) -> None:
    def data(content: str) -> bytes:
        chunk = {"choices": [{"index": 0, "delta": {"content": content}}]}
        return json.dumps(chunk, ensure_ascii=False).encode()

    multi_line = b'data: {"choices": [{"index": 0,\ndata:  "delta": {"content": "c"}}]}\n\n'
    server.script(
        Comment("keep-alive"),
        Raw(b"data: " + data("a") + b"\r\n\r\n"),  # CRLF
        Raw(b"data:" + data("b") + b"\r\r"),  # bare CR, no space after the colon
        Raw(multi_line),  # one event over two data lines
        Raw(b"event: message\nid: 7\nretry: 10\ndata: " + data("d\u2028e") + b"\n\n"),
        Raw(b"data: " + data("f")[:10]),  # an event split across TCP writes
        Delay(0.05),
        Raw(data("f")[10:] + b"\n\n"),
        Finish("stop"),
        Raw(b"data: [DONE]\r\n\r\n"),
    )

    events = await collect(OpenAICompatibleLLM(server.base_url))

    text = "".join(event.text for event in events if isinstance(event, TextDelta))
    assert text == "abcd\u2028ef"
    assert events[-1] == LLMDone("stop")


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (401, False), (429, True), (500, True), (503, True)]
)
async def test_http_error_carries_provider_message_and_next_call_works(
    server: FakeOpenAIServer, status: int, retryable: bool
) -> None:
    server.script(HttpError(status, "Incorrect model `gpt-9` requested."))
    llm = OpenAICompatibleLLM(server.base_url)

    error = await failure(llm)

    assert error.retryable is retryable
    assert str(status) in str(error)
    assert "Incorrect model `gpt-9` requested." in str(error)
    await assert_next_call_works(server, llm)


async def test_gateway_string_error_body_is_understood(server: FakeOpenAIServer) -> None:
    body = {"error": "Authentication error, API token missing/invalid", "status": "error"}
    server.script(HttpError(401, body=body))

    error = await failure(OpenAICompatibleLLM(server.base_url, flavor="assemblyai"))

    assert "API token missing/invalid" in str(error)
    assert error.retryable is False


async def test_long_provider_message_is_truncated(server: FakeOpenAIServer) -> None:
    server.script(HttpError(400, "Invalid content: " + "x" * 5000))

    error = await failure(OpenAICompatibleLLM(server.base_url))

    assert len(str(error)) < 300


async def test_read_timeout_is_retryable_and_next_call_works(server: FakeOpenAIServer) -> None:
    server.script(Text("Hel"), Delay(5), Text("lo"))
    llm = OpenAICompatibleLLM(server.base_url, timeout_s=0.3)

    error = await failure(llm)

    assert error.retryable is True
    await assert_next_call_works(server, llm)


async def test_silence_before_headers_times_out_too(server: FakeOpenAIServer) -> None:
    server.script(Delay(5), *text_reply("late"))

    error = await failure(OpenAICompatibleLLM(server.base_url, timeout_s=0.3))

    assert error.retryable is True


async def test_connection_refused_is_retryable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = OpenAICompatibleLLM(f"http://127.0.0.1:{port}/v1", timeout_s=2)

    try:
        error = await failure(llm)
    finally:
        await close_shared_sessions()

    assert error.retryable is True


async def test_connection_cut_mid_stream_fails_and_next_call_works(
    server: FakeOpenAIServer,
) -> None:
    server.script(Text("Half an ans"), Cut())
    llm = OpenAICompatibleLLM(server.base_url)
    received: list[LLMEvent] = []

    with pytest.raises(ProviderError) as caught:
        async for event in llm.stream(messages=MESSAGES, tools=[]):
            received.append(event)

    assert received == [TextDelta("Half an ans")]
    assert caught.value.code == "llm_failed"
    assert caught.value.retryable is True
    await assert_next_call_works(server, llm)


async def test_connection_cut_before_any_response_fails(server: FakeOpenAIServer) -> None:
    server.script(Cut())

    error = await failure(OpenAICompatibleLLM(server.base_url))

    assert error.retryable is True


async def test_stream_that_ends_without_finish_fails(server: FakeOpenAIServer) -> None:
    server.script(Text("and then"))  # the body ends cleanly, but no finish, no [DONE]

    error = await failure(OpenAICompatibleLLM(server.base_url))

    assert "ended before" in str(error)


async def test_malformed_event_fails_without_retry(server: FakeOpenAIServer) -> None:
    server.script(Text("ok"), Raw(b"data: {not json\n\n"), Finish("stop"), Done())
    llm = OpenAICompatibleLLM(server.base_url)

    error = await failure(llm)

    assert error.retryable is False
    await assert_next_call_works(server, llm)


@pytest.mark.parametrize(
    "step",
    [
        Raw(b"data: " + DEEP + b"\n\n"),  # an event of the stream
        PlainBody(DEEP, content_type="application/json"),  # a whole (non-streamed) answer
        PlainBody(DEEP, status=400, content_type="application/json"),  # an error's body
    ],
)
async def test_json_nested_past_the_parser_is_a_malformed_answer(
    server: FakeOpenAIServer, step: Any
) -> None:
    """A workspace's own LLM URL answering JSON nested 5000 levels deep (a RecursionError
    in Python's parser): before, the turn failed as the platform's ``internal error`` (no
    fallback tried); now it is the provider's failure like any answer that is not JSON."""
    server.script(step)
    llm = OpenAICompatibleLLM(server.base_url, flavor="assemblyai")  # takes whole answers too

    error = await failure(llm)

    assert error.retryable is (step.status >= 500 if isinstance(step, PlainBody) else False)
    await assert_next_call_works(server, llm)


async def test_error_event_inside_the_stream_fails(server: FakeOpenAIServer) -> None:
    server.script(
        Text("Sure"),
        Chunk({"error": {"message": "The server had an error", "type": "server_error"}}),
        Done(),
    )

    error = await failure(OpenAICompatibleLLM(server.base_url))

    assert "The server had an error" in str(error)
    assert error.retryable is True


async def test_cancelling_the_consumer_mid_stream_leaves_the_client_usable(
    server: FakeOpenAIServer,
) -> None:
    server.script(Text("I was saying"), Delay(5), *text_reply("never heard"))
    llm = OpenAICompatibleLLM(server.base_url)
    first_delta = asyncio.Event()

    async def speak() -> None:
        async for _event in llm.stream(messages=MESSAGES, tools=[]):
            first_delta.set()

    turn = asyncio.create_task(speak())
    await asyncio.wait_for(first_delta.wait(), timeout=2)
    turn.cancel()  # a barge-in
    with pytest.raises(asyncio.CancelledError):
        await turn

    await assert_next_call_works(server, llm)


# ---------------------------------------------------------------- gateway normalisation


def test_gateway_flavor_is_detected_from_the_host() -> None:
    assert OpenAICompatibleLLM("https://llm-gateway.assemblyai.com/v1").flavor == "assemblyai"
    assert OpenAICompatibleLLM("https://llm-gateway.eu.assemblyai.com/v1").flavor == "assemblyai"
    assert OpenAICompatibleLLM("https://api.openai.com/v1").flavor == "openai"
    assert OpenAICompatibleLLM("http://localhost:11434/v1").flavor == "openai"
    with pytest.raises(ValueError, match="flavor"):
        OpenAICompatibleLLM("http://localhost:8000/v1", flavor="anthropic")


async def test_gateway_null_id_model_and_usage_are_tolerated(server: FakeOpenAIServer) -> None:
    server.script(text_reply("Hello", " there"), envelope=GATEWAY_ENVELOPE)

    events = await collect(OpenAICompatibleLLM(server.base_url, flavor="assemblyai"))

    assert events == [TextDelta("Hello"), TextDelta(" there"), LLMDone("stop", {})]


async def test_missing_envelope_fields_are_tolerated(server: FakeOpenAIServer) -> None:
    missing = {"id": OMIT, "model": OMIT, "created": OMIT, "object": OMIT, "usage": OMIT}
    server.script(text_reply("Hi"), envelope=missing)

    events = await collect(OpenAICompatibleLLM(server.base_url))

    assert events == [TextDelta("Hi"), LLMDone("stop")]


@pytest.mark.parametrize(
    ("sent", "expected"),
    [("end_turn", "stop"), ("max_tokens", "length"), ("stop_sequence", "stop"), (None, "stop")],
)
@pytest.mark.parametrize("flavor", ["assemblyai", "openai"])
async def test_finish_reasons_are_normalised(
    server: FakeOpenAIServer, flavor: str, sent: str | None, expected: str
) -> None:
    server.script(Text("Hi"), Finish(sent), Done(), envelope=GATEWAY_ENVELOPE)

    events = await collect(OpenAICompatibleLLM(server.base_url, flavor=flavor))

    assert events[-1] == LLMDone(expected)


async def test_tool_use_finish_reason_becomes_tool_calls(server: FakeOpenAIServer) -> None:
    server.script(
        tool_call(0, "toolu_01", "get_weather", '{"city": "Oslo"}'),
        Finish("tool_use"),
        Done(),
        envelope=GATEWAY_ENVELOPE,
    )

    events = await collect(OpenAICompatibleLLM(server.base_url, flavor="assemblyai"))

    assert events == [
        ToolCallsRequested(calls=(ToolCall("toolu_01", "get_weather", '{"city": "Oslo"}'),)),
        LLMDone("tool_calls"),
    ]


async def test_tool_calls_with_stop_reason_still_report_tool_calls(
    server: FakeOpenAIServer,
) -> None:
    server.script(tool_call(0, "call_1", "get_weather", '{"city": "Oslo"}'), Finish("stop"), Done())

    events = await collect(OpenAICompatibleLLM(server.base_url))

    assert isinstance(events[0], ToolCallsRequested)
    assert events[-1] == LLMDone("tool_calls")


async def test_gateway_stream_ending_without_finish_or_done_counts_as_stop(
    server: FakeOpenAIServer,
) -> None:
    server.script(Text("Bye."), envelope=GATEWAY_ENVELOPE)

    events = await collect(OpenAICompatibleLLM(server.base_url, flavor="assemblyai"))

    assert events == [TextDelta("Bye."), LLMDone("stop")]


async def test_gateway_request_pads_blank_content_and_sends_the_bare_key(
    server: FakeOpenAIServer,
) -> None:
    server.script(text_reply("ok"))
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "   "},
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "user", "content": [{"type": "text", "text": "\n"}]},
        {"role": "assistant", "content": None},
    ]
    llm = OpenAICompatibleLLM(server.base_url, api_key="aai-key", flavor="assemblyai")

    await collect(llm, messages=messages)

    request = server.requests[0]
    sent = request.json["messages"]
    assert [m["content"] for m in sent[:3]] == ["Be brief.", "...", "..."]
    assert sent[3]["content"] == [{"type": "text", "text": "..."}]
    assert sent[4]["content"] is None
    assert messages[1]["content"] == "   "  # the caller's history is left alone
    assert request.headers["authorization"] == "aai-key"


async def test_openai_flavor_sends_blank_content_unchanged(server: FakeOpenAIServer) -> None:
    server.script(text_reply("ok"))
    messages = [{"role": "user", "content": "  "}]

    await collect(OpenAICompatibleLLM(server.base_url), messages=messages)

    assert server.requests[0].json["messages"] == messages


async def test_non_streaming_json_body_becomes_the_same_events(server: FakeOpenAIServer) -> None:
    body = completion_body(
        "Checking.",
        tool_calls=[("toolu_9", "get_weather", '{"city": "Lima"}')],
        finish_reason="tool_use",
        model=None,
        usage={"prompt_tokens": 9, "completion_tokens": 4},
    )
    server.script(JsonBody(body))

    events = await collect(OpenAICompatibleLLM(server.base_url, flavor="assemblyai"))

    assert events == [
        TextDelta("Checking."),
        ToolCallsRequested(calls=(ToolCall("toolu_9", "get_weather", '{"city": "Lima"}'),)),
        LLMDone("tool_calls", {"prompt_tokens": 9, "completion_tokens": 4}),
    ]


async def test_non_streaming_body_with_nulls_is_tolerated(server: FakeOpenAIServer) -> None:
    body = {"id": None, "model": None, "usage": None}
    body["choices"] = [{"message": {"role": "assistant", "content": "Hi"}, "finish_reason": None}]
    server.script(JsonBody(body))

    events = await collect(OpenAICompatibleLLM(server.base_url, flavor="assemblyai"))

    assert events == [TextDelta("Hi"), LLMDone("stop")]


async def test_speech_and_llm_streams_have_pools_of_their_own() -> None:
    """OpenAI serves chat and speech from one host: one pool would let a session's speech
    queue behind other sessions' long LLM streams."""
    from engine.providers import http_pool

    llm_pool, tts_pool = http_pool.shared_session("llm"), http_pool.shared_session("tts")
    assert llm_pool is not tts_pool
    assert llm_pool is http_pool.shared_session("llm")  # one per loop, reused
    assert llm_pool.connector is not None and llm_pool.connector.limit >= 200
