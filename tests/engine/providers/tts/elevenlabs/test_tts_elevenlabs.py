"""The ElevenLabs adapter against a fake of the multi-context ``multi-stream-input``
WebSocket: one connection reused across sentences, reopened after a failure."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator

import pytest

from engine.providers.tts.elevenlabs.adapter import ElevenLabsTTS
from tests.engine.providers.tts.elevenlabs.fake_server import (
    DEFAULT_VOICE,
    ErrorMessage,
    FakeElevenLabsServer,
)
from tests.fakes.ws_server import (
    SENTENCE,
    Cut,
    Garbage,
    Hang,
    OddFrames,
    assert_whole_samples,
    audio_before_failure,
    failure,
    silence_failure,
    speech_pcm,
    spoken,
)

KEY = "xi-secret-key-51c9"
OTHER_VOICE = "21m00Tcm4TlvDq8ikWAM"


@pytest.fixture
async def server() -> AsyncIterator[FakeElevenLabsServer]:
    async with FakeElevenLabsServer(api_key=KEY, voices=(DEFAULT_VOICE, OTHER_VOICE)) as fake:
        yield fake


def elevenlabs(server: FakeElevenLabsServer, **options: object) -> ElevenLabsTTS:
    return ElevenLabsTTS(api_key=KEY, base_url=server.url, **options)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the protocol


async def test_request_follows_the_multi_context_protocol(server: FakeElevenLabsServer) -> None:
    await spoken(elevenlabs(server))

    (connection,) = server.connections
    assert connection.path == f"/v1/text-to-speech/{DEFAULT_VOICE}/multi-stream-input"
    assert connection.query == {
        "model_id": "eleven_flash_v2_5",
        "output_format": "pcm_24000",
        "inactivity_timeout": "180",
    }
    assert connection.headers["xi-api-key"] == KEY
    assert [json.loads(message) for message in connection.received] == [
        {"text": " ", "context_id": "c1"},
        {"text": SENTENCE + " ", "context_id": "c1", "flush": True},
        {"context_id": "c1", "close_context": True},
    ]
    assert server.protocol_errors == []


async def test_one_socket_carries_three_sentences_and_closes_with_the_session(
    server: FakeElevenLabsServer,
) -> None:
    tts = elevenlabs(server)
    await tts.warm()  # opened ahead, as the session does while its greeting is prepared
    sentences = ["Hello there.", "How can I help?", "Take your time."]
    for sentence in sentences:
        assert b"".join(await spoken(tts, sentence)) == speech_pcm(sentence)

    (connection,) = server.connections
    flushed = [json.loads(m) for m in connection.received if '"flush"' in str(m)]
    assert [(m["context_id"], m["text"]) for m in flushed] == [
        ("c1", "Hello there. "),
        ("c2", "How can I help? "),
        ("c3", "Take your time. "),
    ]
    await tts.aclose()
    assert json.loads(connection.received[-1]) == {"close_socket": True}
    await asyncio.wait_for(connection.closed.wait(), 1)


async def test_a_broken_socket_fails_its_sentence_and_the_next_opens_another(
    server: FakeElevenLabsServer,
) -> None:
    tts = elevenlabs(server)
    server.inject(Cut(1, 1011, "Internal error"))
    received, error = await audio_before_failure(tts)
    assert len(received) == 1 and error.retryable is True

    assert b"".join(await spoken(tts, "Again.")) == speech_pcm("Again.")
    assert b"".join(await spoken(tts, "And again.")) == speech_pcm("And again.")
    assert len(server.connections) == 2  # reopened once, then reused
    await tts.aclose()


async def test_after_the_session_a_call_gets_a_socket_of_its_own(
    server: FakeElevenLabsServer,
) -> None:
    tts = elevenlabs(server)
    await spoken(tts)
    await tts.aclose()
    await spoken(tts, "A probe.")  # a circuit breaker's probe, after the session ended
    assert len(server.connections) == 2
    await asyncio.wait_for(server.connections[1].closed.wait(), 1)


async def test_model_is_sent_as_configured(server: FakeElevenLabsServer) -> None:
    await spoken(elevenlabs(server, model_id="eleven_turbo_v2_5"))

    assert server.connections[0].query["model_id"] == "eleven_turbo_v2_5"


async def test_audio_arrives_in_several_chunks_of_whole_samples(
    server: FakeElevenLabsServer,
) -> None:
    assert_whole_samples(await spoken(elevenlabs(server)))


async def test_frames_that_split_samples_are_realigned(server: FakeElevenLabsServer) -> None:
    server.inject(OddFrames())

    assert_whole_samples(await spoken(elevenlabs(server)))


# ---------------------------------------------------------------- voices


@pytest.mark.parametrize(
    ("default", "asked", "path_voice"),
    [
        (DEFAULT_VOICE, None, DEFAULT_VOICE),
        (OTHER_VOICE, None, OTHER_VOICE),
        (DEFAULT_VOICE, f" {OTHER_VOICE} ", OTHER_VOICE),
    ],
)
async def test_voice_id_is_the_asked_one_or_the_default(
    server: FakeElevenLabsServer, default: str, asked: str | None, path_voice: str
) -> None:
    await spoken(elevenlabs(server, default_voice=default), voice=asked)

    assert server.connections[0].path == f"/v1/text-to-speech/{path_voice}/multi-stream-input"


async def test_unknown_voice_id_fails_with_the_providers_message(
    server: FakeElevenLabsServer, caplog: pytest.LogCaptureFixture
) -> None:
    error = await failure(elevenlabs(server), caplog, secrets=[KEY], voice="A" * 20)

    assert f"{'A' * 20} was not found" in str(error)
    assert error.retryable is False


async def test_voice_name_instead_of_an_id_fails_without_connecting(
    server: FakeElevenLabsServer, caplog: pytest.LogCaptureFixture
) -> None:
    error = await failure(elevenlabs(server), caplog, secrets=[KEY], voice="Rachel (legacy)")

    assert "voice ids" in str(error)
    assert server.connections == []


# ---------------------------------------------------------------- configuration


async def test_missing_key_is_named(
    server: FakeElevenLabsServer, caplog: pytest.LogCaptureFixture
) -> None:
    error = await failure(ElevenLabsTTS(api_key="", base_url=server.url), caplog, secrets=[KEY])

    assert "ELEVENLABS_API_KEY" in str(error)
    assert server.connections == []


async def test_blank_text_yields_nothing_without_connecting(server: FakeElevenLabsServer) -> None:
    assert await spoken(elevenlabs(server), "  ") == []
    assert server.connections == []


# ---------------------------------------------------------------- failures


async def test_wrong_key_fails_without_quoting_it(
    server: FakeElevenLabsServer, caplog: pytest.LogCaptureFixture
) -> None:
    tts = ElevenLabsTTS(api_key="xi-wrong-key-0000", base_url=server.url)

    error = await failure(tts, caplog, secrets=["xi-wrong-key-0000"])

    assert "ELEVENLABS_API_KEY" in str(error)
    assert error.retryable is False


async def test_silent_server_times_out(
    server: FakeElevenLabsServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.inject(Hang())

    await silence_failure(elevenlabs(server, timeout_s=0.3), caplog, secrets=[KEY], timeout_s=0.3)


BASE64_GARBAGE = json.dumps({"audio": "%%% not base64 %%%", "isFinal": None, "contextId": "c1"})


@pytest.mark.parametrize(
    ("fault", "garbage", "said", "retryable"),
    [
        (Cut(2, 1011, "Internal error"), "", "(code 1011): Internal error", True),
        (Cut(2, 1008, "We are sorry, something went wrong."), "", "something went wrong", False),
        (Garbage(after_frames=1), "Internal Server Error", "not valid JSON", False),
        (Garbage(after_frames=1), BASE64_GARBAGE, "not valid base64", False),
    ],
)
async def test_broken_stream_fails_saying_what_happened(
    server: FakeElevenLabsServer,
    caplog: pytest.LogCaptureFixture,
    fault: Cut | Garbage,
    garbage: str,
    said: str,
    retryable: bool,
) -> None:
    server.garbage = garbage
    server.inject(fault)

    error = await failure(elevenlabs(server), caplog, secrets=[KEY])

    assert said in str(error)
    assert error.retryable is retryable


async def test_error_message_mid_stream_fails_after_the_audio_so_far(
    server: FakeElevenLabsServer,
) -> None:
    server.inject(ErrorMessage("This request exceeds your quota.", "quota_exceeded", 1))

    received, error = await audio_before_failure(elevenlabs(server))

    assert len(received) == 1
    assert "exceeds your quota" in str(error)
    assert error.retryable is False


# ---------------------------------------------------------------- barge-in


async def test_a_barge_in_drops_the_sentence_and_keeps_the_socket(
    server: FakeElevenLabsServer,
) -> None:
    tts = elevenlabs(server)
    audio = tts.synthesize(SENTENCE)
    assert isinstance(audio, AsyncGenerator)
    assert len(await anext(audio)) > 0
    await audio.aclose()  # the user talked over it: its remaining audio is ignored

    assert b"".join(await spoken(tts, "Next one.")) == speech_pcm("Next one.")
    assert len(server.connections) == 1
    await tts.aclose()
