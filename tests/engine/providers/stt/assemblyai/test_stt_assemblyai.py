"""The AssemblyAI streaming adapter against a fake server speaking Universal Streaming v3."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from engine.providers.base import (
    FinalTranscript,
    PartialTranscript,
    ProviderError,
    SpeechStarted,
    STTEvent,
)
from engine.providers.stt.assemblyai.adapter import AssemblyAIStream, AssemblyAISTT
from tests.engine.providers.stt.assemblyai.fake_server import (
    CloseWith,
    EndOfTurn,
    FakeAssemblyAIServer,
    FakeSession,
    Partial,
    Send,
    SpeechStart,
    WaitAudio,
    turn_message,
)

API_KEY = "aai-secret-key-0123456789"
SAID = "my card number is four one one one"  # what the user said: never in errors or logs
RATE = 16000

Opener = Callable[..., Awaitable[AssemblyAIStream]]


@pytest.fixture
async def server() -> AsyncIterator[FakeAssemblyAIServer]:
    async with FakeAssemblyAIServer(api_key=API_KEY) as fake:
        yield fake


def make_stt(server: FakeAssemblyAIServer, **options: Any) -> AssemblyAISTT:
    stt = AssemblyAISTT(api_key=API_KEY, base_url=server.base_url, timeout_s=2, **options)
    stt.termination_wait_s = 0.5
    return stt


@pytest.fixture
async def open_stream(server: FakeAssemblyAIServer) -> AsyncIterator[Opener]:
    streams: list[AssemblyAIStream] = []

    async def opener(**options: Any) -> AssemblyAIStream:
        stream = await make_stt(server, **options).open(sample_rate=RATE)
        streams.append(stream)
        return stream

    yield opener
    for stream in streams:
        await stream.aclose()


def pcm(ms: int, fill: int = 0) -> bytes:
    return bytes([fill & 0xFF]) * (2 * RATE * ms // 1000)


async def push(stream: AssemblyAIStream, ms: int, frame_ms: int = 20) -> None:
    for _ in range(ms // frame_ms):
        await stream.push_audio(pcm(frame_ms, fill=7))


async def next_event(stream: AssemblyAIStream) -> STTEvent:
    async def first() -> STTEvent:
        async for event in stream.events():
            return event
        raise AssertionError("the stream ended")

    return await asyncio.wait_for(first(), 2)


async def until_final(stream: AssemblyAIStream) -> list[STTEvent]:
    events = [await next_event(stream)]
    while not isinstance(events[-1], FinalTranscript):
        events.append(await next_event(stream))
    return events


async def remaining(stream: AssemblyAIStream) -> list[STTEvent]:
    async def drain() -> list[STTEvent]:
        return [event async for event in stream.events()]

    return await asyncio.wait_for(drain(), 2)


async def closed(session: FakeSession) -> FakeSession:
    await asyncio.wait_for(session.closed.wait(), 2)
    return session


def assert_discreet(error: ProviderError, server: FakeAssemblyAIServer) -> None:
    assert error.code == "stt_failed"
    for secret in (API_KEY, SAID, *server.issued_tokens):
        assert secret not in str(error)


# ---------------------------------------------------------------- connecting


async def test_token_request_carries_the_bare_key_and_the_expiry(
    server: FakeAssemblyAIServer, open_stream: Opener
) -> None:
    await open_stream(token_expires_s=120)

    [request] = server.token_requests
    assert request.path == "/v3/token"
    assert request.headers["authorization"] == API_KEY  # no "Bearer"
    assert request.query == {"expires_in_seconds": "120"}


async def test_websocket_query_names_audio_model_turn_settings_and_token(
    server: FakeAssemblyAIServer, open_stream: Opener
) -> None:
    await open_stream(
        speech_model="universal-streaming-multilingual",
        end_of_turn_confidence_threshold=0.4,
        min_end_of_turn_silence_when_confident=160,
        max_turn_silence=400,
    )

    assert server.sessions[0].query == {
        "sample_rate": "16000",
        "encoding": "pcm_s16le",
        "speech_model": "universal-streaming-multilingual",
        "format_turns": "true",
        "end_of_turn_confidence_threshold": "0.4",
        "min_end_of_turn_silence_when_confident": "160",
        "max_turn_silence": "400",
        "token": server.issued_tokens[0],
    }


async def test_unset_turn_settings_stay_out_of_the_query(
    server: FakeAssemblyAIServer, open_stream: Opener
) -> None:
    await open_stream(format_turns=False)

    assert server.sessions[0].query == {
        "sample_rate": "16000",
        "encoding": "pcm_s16le",
        "speech_model": "universal-streaming-english",
        "format_turns": "false",
        "token": server.issued_tokens[0],
    }


async def test_vocabulary_goes_up_as_keyterms_prompt(
    server: FakeAssemblyAIServer, open_stream: Opener
) -> None:
    await open_stream(vocabulary=["index.js", "greet()", "Acme Cloud"])

    query = server.sessions[0].query
    assert json.loads(query["keyterms_prompt"]) == ["index.js", "greet()", "Acme Cloud"]


def test_settings_outside_the_documented_ranges_are_refused() -> None:
    with pytest.raises(ValueError, match="http"):
        AssemblyAISTT(api_key=API_KEY, base_url="ftp://streaming.assemblyai.com")
    with pytest.raises(ValueError, match="token_expires_s"):
        AssemblyAISTT(api_key=API_KEY, token_expires_s=601)
    with pytest.raises(ValueError, match="threshold"):
        AssemblyAISTT(api_key=API_KEY, end_of_turn_confidence_threshold=1.5)


# ---------------------------------------------------------------- audio


@pytest.mark.parametrize("frames_ms", [[20] * 127, [2500, 40]])
async def test_audio_goes_up_in_messages_of_50_to_1000_ms(
    server: FakeAssemblyAIServer, open_stream: Opener, frames_ms: list[int]
) -> None:
    stream = await open_stream()
    pushed = b"".join(pcm(ms, fill=index + 1) for index, ms in enumerate(frames_ms))
    for index, ms in enumerate(frames_ms):
        await stream.push_audio(pcm(ms, fill=index + 1))

    await stream.aclose()

    session = await closed(server.sessions[0])
    assert session.close_code == 1000  # the fake closes with 3007 on a message out of range
    assert session.audio_ms == [100.0] * 25 + [50.0]  # the 40 ms tail is padded to 50 ms
    sent = b"".join(session.audio)
    assert sent[: len(pushed)] == pushed
    assert set(sent[len(pushed) :]) == {0}


async def test_audio_after_aclose_is_refused(open_stream: Opener) -> None:
    stream = await open_stream()
    await stream.aclose()

    with pytest.raises(ProviderError, match="closed") as caught:
        await stream.push_audio(pcm(20))

    assert caught.value.retryable is False


# ---------------------------------------------------------------- transcripts


async def test_partials_skip_blanks_and_repeats(
    server: FakeAssemblyAIServer, open_stream: Opener
) -> None:
    server.script(
        WaitAudio(100),
        Partial(""),
        Partial("hello"),
        Partial("hello"),
        Partial("hello there"),
        EndOfTurn("hello there"),
    )
    stream = await open_stream(format_turns=False)

    await push(stream, 100)
    events = await until_final(stream)

    assert events[:-1] == [PartialTranscript("hello"), PartialTranscript("hello there")]
    assert isinstance(events[-1], FinalTranscript)
    assert events[-1].text == "hello there"


async def test_formatted_end_of_turn_is_the_one_final_timed_by_audio_and_endpoint(
    server: FakeAssemblyAIServer, open_stream: Opener
) -> None:
    server.script(
        WaitAudio(200),
        Partial("hello"),
        EndOfTurn("hello there", formatted="Hello there.", end_ms=130, formatting_delay=0.15),
    )
    stream = await open_stream()  # format_turns is on by default
    pushed_between: list[tuple[float, float]] = []
    for _ in range(10):
        before = time.monotonic()
        await stream.push_audio(pcm(20))
        pushed_between.append((before, time.monotonic()))
        await asyncio.sleep(0.005)

    events = await until_final(stream)
    received_at = time.monotonic()

    final = events[-1]
    assert events == [PartialTranscript("hello"), final]
    assert isinstance(final, FinalTranscript)
    assert final.text == "Hello there."
    assert final.speech_end_at is not None and final.endpoint_at is not None
    before, after = pushed_between[6]  # the frame at 120-140 ms holds the word ending at 130
    assert before <= final.speech_end_at <= after
    assert final.endpoint_at >= pushed_between[-1][0]
    # The endpoint is when the unformatted end of turn came, not its formatted copy.
    assert received_at - final.endpoint_at >= 0.14


async def test_without_formatting_the_first_end_of_turn_is_final(
    server: FakeAssemblyAIServer, open_stream: Opener
) -> None:
    server.script(WaitAudio(100), EndOfTurn("book a table for two"))
    stream = await open_stream(format_turns=False)

    await push(stream, 100)
    [final] = await until_final(stream)

    assert isinstance(final, FinalTranscript)
    assert final.text == "book a table for two"


async def test_a_turn_formatted_from_the_start_is_final_at_once(
    server: FakeAssemblyAIServer, open_stream: Opener
) -> None:
    said = turn_message("Yes.", turn_order=0, last_end_ms=80, end_of_turn=True, formatted=True)
    server.script(WaitAudio(100), Send(said))  # Universal-3 Pro formats every turn itself
    stream = await open_stream(speech_model="u3-rt-pro")

    await push(stream, 100)

    [final] = await until_final(stream)
    assert isinstance(final, FinalTranscript)
    assert final.text == "Yes."


async def test_an_end_of_turn_whose_formatting_never_comes_is_still_final(
    server: FakeAssemblyAIServer, open_stream: Opener
) -> None:
    unformatted = turn_message("hi there", turn_order=0, last_end_ms=80, end_of_turn=True)
    next_turn = turn_message("and", turn_order=1, last_end_ms=90, end_of_turn=False)
    server.script(WaitAudio(100), Send(unformatted), Send(next_turn))
    stream = await open_stream()

    await push(stream, 100)

    first = await next_event(stream)
    assert isinstance(first, FinalTranscript)
    assert first.text == "hi there"
    assert first.endpoint_at is not None
    assert await next_event(stream) == PartialTranscript("and")


async def test_nothing_of_a_turn_comes_after_its_final(
    server: FakeAssemblyAIServer, open_stream: Opener
) -> None:
    # A partial of a turn that arrives after its final would replace "landlord" on the
    # user's screen with "land"; the formatted copy of a turn that was already final
    # (ended unformatted when the next turn began) would be a second turn.
    unformatted = turn_message("my landlord", turn_order=0, last_end_ms=80, end_of_turn=True)
    next_turn = turn_message("and", turn_order=1, last_end_ms=90, end_of_turn=False)
    formatted = turn_message(
        "My landlord.", turn_order=0, last_end_ms=80, end_of_turn=True, formatted=True
    )
    late = turn_message("my land", turn_order=0, last_end_ms=60, end_of_turn=False)
    done = turn_message("And then.", turn_order=1, last_end_ms=95, end_of_turn=True, formatted=True)
    server.script(
        WaitAudio(100), Send(unformatted), Send(next_turn), Send(formatted), Send(late), Send(done)
    )
    stream = await open_stream(format_turns=True)

    await push(stream, 100)
    first = await until_final(stream)
    second = await until_final(stream)

    assert [type(e) for e in first] == [FinalTranscript]
    assert first[0].text == "my landlord"
    assert second[:-1] == [PartialTranscript("and")]
    assert isinstance(second[-1], FinalTranscript)
    assert second[-1].text == "And then."


async def test_speech_started_is_passed_on(
    server: FakeAssemblyAIServer, open_stream: Opener
) -> None:
    server.script(WaitAudio(100), SpeechStart(), Partial("hi"), EndOfTurn("hi"))
    stream = await open_stream(format_turns=False)

    await push(stream, 100)
    events = await until_final(stream)

    assert events[:2] == [SpeechStarted(), PartialTranscript("hi")]


# ---------------------------------------------------------------- control messages


async def test_force_endpoint_sends_the_buffered_audio_then_ends_the_turn(
    server: FakeAssemblyAIServer, open_stream: Opener
) -> None:
    server.script(WaitAudio(100), Partial("book a table"))
    stream = await open_stream(format_turns=False)
    await push(stream, 140)
    assert await next_event(stream) == PartialTranscript("book a table")

    await stream.force_endpoint()
    final = await next_event(stream)

    assert isinstance(final, FinalTranscript)
    assert final.text == "book a table"
    session = server.sessions[0]
    assert session.control_types == ["ForceEndpoint"]
    assert session.audio_ms == [100.0, 50.0]  # the 40 ms tail went first, padded to 50 ms


async def test_update_configuration_sends_only_the_settings_given(
    server: FakeAssemblyAIServer, open_stream: Opener
) -> None:
    stream = await open_stream()

    await stream.update_configuration(max_turn_silence=800, end_of_turn_confidence_threshold=None)

    session = server.sessions[0]
    await asyncio.wait_for(session.wait_for_control("UpdateConfiguration"), 2)
    assert session.control == [{"type": "UpdateConfiguration", "max_turn_silence": 800}]


async def test_keepalive_goes_out_only_while_no_audio_does(server: FakeAssemblyAIServer) -> None:
    stt = make_stt(server)
    stt.keepalive_after_s = 0.08
    stream = await stt.open(sample_rate=RATE)
    session = server.sessions[0]
    try:
        for _ in range(20):  # 400 ms of audio, a 100 ms message every 50 ms or so
            await stream.push_audio(pcm(20))
            await asyncio.sleep(0.01)
        assert "KeepAlive" not in session.control_types

        await asyncio.wait_for(session.wait_for_control("KeepAlive"), 2)
    finally:
        await stream.aclose()


async def test_aclose_terminates_the_session_promptly(
    server: FakeAssemblyAIServer, open_stream: Opener
) -> None:
    stream = await open_stream()
    await push(stream, 60)

    started = time.monotonic()
    await stream.aclose()

    assert time.monotonic() - started < 0.3
    session = await closed(server.sessions[0])
    assert session.control_types == ["Terminate"]
    assert session.audio_ms == [60.0]  # the buffered audio went before Terminate
    assert session.close_code == 1000
    assert await remaining(stream) == []  # events end, without an error


async def test_aclose_gives_up_waiting_for_a_termination_that_never_comes(
    server: FakeAssemblyAIServer,
) -> None:
    server.answer_terminate = False
    stt = make_stt(server)
    stt.termination_wait_s = 0.2
    stream = await stt.open(sample_rate=RATE)

    started = time.monotonic()
    await stream.aclose()

    assert 0.15 <= time.monotonic() - started < 0.6
    assert server.sessions[0].control_types == ["Terminate"]


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("close_code", "error", "meaning", "retryable"),
    [
        (4001, "Not Authorized", "not authorized", False),
        (4029, "Client sent audio too fast", "too fast", True),
        (4031, "Session idle for too long", "idle", True),
        (3008, "Session Expired: Maximum session duration exceeded", "session expired", True),
        (3005, "Session Cancelled: An error occurred", "server error", True),
    ],
)
async def test_close_codes_fail_the_stream_with_a_readable_error(
    server: FakeAssemblyAIServer,
    open_stream: Opener,
    close_code: int,
    error: str,
    meaning: str,
    retryable: bool,
) -> None:
    server.script(WaitAudio(100), Partial(SAID), CloseWith(close_code, error=error))
    stream = await open_stream()
    await push(stream, 100)

    with pytest.raises(ProviderError) as caught:
        await remaining(stream)

    failure = caught.value
    assert str(close_code) in str(failure)
    assert meaning in str(failure).lower()
    assert failure.retryable is retryable
    assert_discreet(failure, server)
    with pytest.raises(ProviderError):
        await stream.push_audio(pcm(20))


async def test_session_refused_before_begin_fails_open(server: FakeAssemblyAIServer) -> None:
    server.refuse_sessions(1008, f"Unauthorized Connection: key {API_KEY} is not allowed")

    with pytest.raises(ProviderError) as caught:
        await make_stt(server).open(sample_rate=RATE)

    assert "1008" in str(caught.value)
    assert "[redacted] is not allowed" in str(caught.value)
    assert caught.value.retryable is False
    assert_discreet(caught.value, server)


async def test_wrong_api_key_fails_open_without_retry(server: FakeAssemblyAIServer) -> None:
    stt = AssemblyAISTT(api_key="wrong-key-456", base_url=server.base_url)

    with pytest.raises(ProviderError) as caught:
        await stt.open(sample_rate=RATE)

    assert "HTTP 401" in str(caught.value)
    assert "wrong-key-456" not in str(caught.value)
    assert caught.value.retryable is False
    assert server.sessions == []


@pytest.mark.parametrize(
    ("status", "retryable"), [(429, True), (500, True), (503, True), (400, False)]
)
async def test_token_errors_say_whether_a_retry_could_help(
    server: FakeAssemblyAIServer, status: int, retryable: bool
) -> None:
    server.fail_tokens(status, "Something went wrong")

    with pytest.raises(ProviderError) as caught:
        await make_stt(server).open(sample_rate=RATE)

    assert f"HTTP {status}: Something went wrong" in str(caught.value)
    assert caught.value.retryable is retryable
    assert_discreet(caught.value, server)


async def test_token_request_that_hangs_times_out(server: FakeAssemblyAIServer) -> None:
    server.token_delay = 5
    stt = AssemblyAISTT(api_key=API_KEY, base_url=server.base_url, timeout_s=0.2)

    started = time.monotonic()
    with pytest.raises(ProviderError, match="in time") as caught:
        await stt.open(sample_rate=RATE)

    assert time.monotonic() - started < 1
    assert caught.value.retryable is True


async def test_unreachable_service_is_retryable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    stt = AssemblyAISTT(api_key=API_KEY, base_url=f"http://127.0.0.1:{port}", timeout_s=1)

    with pytest.raises(ProviderError) as caught:
        await stt.open(sample_rate=RATE)

    assert caught.value.retryable is True


async def test_missing_api_key_fails_open_before_any_request(
    server: FakeAssemblyAIServer,
) -> None:
    with pytest.raises(ProviderError) as caught:
        await AssemblyAISTT(api_key="", base_url=server.base_url).open(sample_rate=RATE)

    assert str(caught.value) == "ASSEMBLYAI_API_KEY is not set"
    assert caught.value.retryable is False
    assert server.token_requests == []


async def test_logs_hold_no_key_token_or_transcript(
    server: FakeAssemblyAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.script(WaitAudio(100), Partial(SAID), EndOfTurn(SAID), CloseWith(3005, error="oops"))
    stream = await make_stt(server).open(sample_rate=RATE)
    await push(stream, 100)
    with pytest.raises(ProviderError):
        await remaining(stream)
    await stream.aclose()

    # The fake server's own websockets logger is not the adapter's business.
    logged = [r.getMessage() for r in caplog.records if not r.name.startswith("websockets")]
    assert any("3005" in line for line in logged)
    for secret in (API_KEY, SAID, *server.issued_tokens):
        assert not [line for line in logged if secret in line]
