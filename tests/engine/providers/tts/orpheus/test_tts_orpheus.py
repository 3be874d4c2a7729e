"""The Orpheus adapter against a fake of Baseten's Orpheus WebSocket truss."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator

import pytest

from engine.providers.tts.orpheus.adapter import VOICES, OrpheusTTS
from tests.engine.providers.tts.orpheus.fake_server import FakeOrpheusServer
from tests.fakes.ws_server import (
    SENTENCE,
    Cut,
    Garbage,
    Hang,
    OddFrames,
    assert_stopping_early_closes_promptly,
    assert_whole_samples,
    audio_before_failure,
    failure,
    silence_failure,
    spoken,
)

KEY = "orpheus-secret-key-7f3a"


@pytest.fixture
async def server() -> AsyncIterator[FakeOrpheusServer]:
    async with FakeOrpheusServer(api_key=KEY) as fake:
        yield fake


def orpheus(server: FakeOrpheusServer, **options: object) -> OrpheusTTS:
    return OrpheusTTS(url=server.url, api_key=KEY, **options)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the protocol


async def test_request_follows_the_truss_protocol(server: FakeOrpheusServer) -> None:
    await spoken(orpheus(server))

    (connection,) = server.connections
    assert connection.path == "/environments/production/websocket"
    assert connection.headers["authorization"] == f"Api-Key {KEY}"
    settings, *words = connection.received
    assert json.loads(settings) == {
        "voice": "tara",
        "max_tokens": 6144,
        "buffer_size": 10,
        "temperature": 0.6,
        "top_p": 0.8,
        "repetition_penalty": 1.3,
    }
    assert words == [*SENTENCE.split(), "__END__"]
    assert server.protocol_errors == []


async def test_generation_settings_are_sent_as_configured(server: FakeOrpheusServer) -> None:
    tts = orpheus(
        server, max_tokens=2000, buffer_size=4, temperature=0.4, top_p=0.9, repetition_penalty=1.1
    )

    await spoken(tts, "Hello.")

    settings = json.loads(server.connections[0].received[0])
    assert (settings["max_tokens"], settings["buffer_size"]) == (2000, 4)
    assert (settings["temperature"], settings["top_p"]) == (0.4, 0.9)
    assert settings["repetition_penalty"] == 1.1


async def test_audio_arrives_in_several_chunks_of_whole_samples(server: FakeOrpheusServer) -> None:
    assert_whole_samples(await spoken(orpheus(server)))


async def test_frames_that_split_samples_are_realigned(server: FakeOrpheusServer) -> None:
    server.inject(OddFrames())

    assert_whole_samples(await spoken(orpheus(server)))


async def test_each_sentence_gets_its_own_connection(server: FakeOrpheusServer) -> None:
    tts = orpheus(server)

    assert_whole_samples(await spoken(tts, "One."), "One.")
    assert_whole_samples(await spoken(tts, "Two words."), "Two words.")
    assert len(server.connections) == 2


# ---------------------------------------------------------------- voices


@pytest.mark.parametrize(
    ("default", "asked", "sent"),
    [
        ("tara", None, "tara"),
        ("mia", None, "mia"),
        ("tara", "Leo", "leo"),
        ("tara", " zoe ", "zoe"),
    ],
)
async def test_voice_is_the_asked_one_or_the_default(
    server: FakeOrpheusServer, default: str, asked: str | None, sent: str
) -> None:
    await spoken(orpheus(server, default_voice=default), voice=asked)

    assert json.loads(server.connections[0].received[0])["voice"] == sent


async def test_unknown_voice_fails_listing_the_voices_without_connecting(
    server: FakeOrpheusServer, caplog: pytest.LogCaptureFixture
) -> None:
    error = await failure(orpheus(server), caplog, secrets=[KEY], voice="alloy")

    assert "'alloy'" in str(error)
    assert all(voice in str(error) for voice in VOICES)
    assert error.retryable is False
    assert server.connections == []


def test_unknown_default_voice_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="tara"):
        OrpheusTTS(url="ws://localhost", api_key=KEY, default_voice="rachel")


# ---------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("url", "key", "setting"), [("", KEY, "ORPHEUS_URL"), (None, " ", "ORPHEUS_API_KEY")]
)
async def test_missing_setting_is_named(
    server: FakeOrpheusServer,
    caplog: pytest.LogCaptureFixture,
    url: str | None,
    key: str,
    setting: str,
) -> None:
    tts = OrpheusTTS(url=server.url if url is None else url, api_key=key)

    error = await failure(tts, caplog, secrets=[KEY])

    assert setting in str(error)
    assert error.retryable is False
    assert server.connections == []


async def test_blank_text_yields_nothing_without_connecting(server: FakeOrpheusServer) -> None:
    assert await spoken(orpheus(server), " \n\t") == []
    assert server.connections == []


# ---------------------------------------------------------------- failures


async def test_wrong_key_is_refused_at_the_handshake(
    server: FakeOrpheusServer, caplog: pytest.LogCaptureFixture
) -> None:
    tts = OrpheusTTS(url=server.url, api_key="not-the-key")

    error = await failure(tts, caplog, secrets=["not-the-key"])

    assert "401" in str(error)
    assert "ORPHEUS_API_KEY" in str(error)
    assert error.retryable is False


async def test_silent_server_times_out(
    server: FakeOrpheusServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.inject(Hang())

    error = await silence_failure(
        orpheus(server, timeout_s=0.3), caplog, secrets=[KEY], timeout_s=0.3
    )

    assert "0.3 s" in str(error)


async def test_silence_mid_sentence_fails_after_the_audio_so_far(
    server: FakeOrpheusServer,
) -> None:
    server.inject(Hang(after_frames=1))

    received, error = await audio_before_failure(orpheus(server, timeout_s=0.3))

    assert len(received) == 1
    assert error.retryable is True


@pytest.mark.parametrize(
    ("fault", "said", "retryable"),
    [
        (
            Cut(after_frames=2, code=1011, reason="engine crashed"),
            "(code 1011): engine crashed",
            True,
        ),
        (Cut(after_frames=1), "the connection to Orpheus broke", True),
        (Garbage(after_frames=1), "a text message where audio was expected", False),
    ],
)
async def test_broken_stream_fails_saying_what_happened(
    server: FakeOrpheusServer,
    caplog: pytest.LogCaptureFixture,
    fault: Cut | Garbage,
    said: str,
    retryable: bool,
) -> None:
    server.inject(fault)

    error = await failure(orpheus(server), caplog, secrets=[KEY])

    assert said in str(error)
    assert error.retryable is retryable


async def test_connection_refused_is_retryable(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    tts = OrpheusTTS(url=f"ws://127.0.0.1:{port}", api_key=KEY)

    error = await failure(tts, caplog, secrets=[KEY])

    assert "could not connect" in str(error)
    assert error.retryable is True


async def test_url_that_is_not_a_websocket_url_fails(caplog: pytest.LogCaptureFixture) -> None:
    tts = OrpheusTTS(url="https://model-abc.api.baseten.co", api_key=KEY)

    error = await failure(tts, caplog, secrets=[KEY])

    assert "ws://" in str(error)
    assert error.retryable is False


# ---------------------------------------------------------------- barge-in


async def test_closing_early_closes_the_connection_promptly(server: FakeOrpheusServer) -> None:
    server.inject(Hang(after_frames=1))

    await assert_stopping_early_closes_promptly(
        orpheus(server), lambda: server.connections[0].closed
    )


async def test_cancelling_the_listener_closes_the_connection(server: FakeOrpheusServer) -> None:
    server.inject(Hang(after_frames=1))
    first_chunk = asyncio.Event()

    async def listen() -> None:
        async for _chunk in orpheus(server).synthesize(SENTENCE):
            first_chunk.set()

    turn = asyncio.create_task(listen())
    await asyncio.wait_for(first_chunk.wait(), timeout=1)
    turn.cancel()  # a barge-in cancels the turn while it waits for audio
    with pytest.raises(asyncio.CancelledError):
        await turn

    await asyncio.wait_for(server.connections[0].closed.wait(), timeout=0.5)
