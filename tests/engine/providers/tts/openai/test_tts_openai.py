"""The OpenAI speech adapter against a fake ``/v1/audio/speech`` streaming raw PCM."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.providers.http_pool import close_shared_sessions
from engine.providers.tts.openai.adapter import OpenAITTS
from tests.engine.providers.llm.openai.fake_server import HttpError
from tests.engine.providers.tts.openai.fake_server import FakeOpenAISpeechServer
from tests.fakes.ws_server import (
    SENTENCE,
    Cut,
    Hang,
    OddFrames,
    assert_stopping_early_closes_promptly,
    assert_whole_samples,
    audio_before_failure,
    failure,
    silence_failure,
    speech_pcm,
    spoken,
)

KEY = "sk-secret-key-9d2e"
SECRETS = [KEY, KEY[-4:]]  # OpenAI quotes a rejected key half-masked


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAISpeechServer]:
    fake = FakeOpenAISpeechServer(api_key=KEY)
    async with fake:
        try:
            yield fake
        finally:
            await close_shared_sessions()


def openai(server: FakeOpenAISpeechServer, **options: object) -> OpenAITTS:
    return OpenAITTS(api_key=KEY, base_url=server.base_url, **options)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the request


async def test_request_asks_for_raw_pcm(server: FakeOpenAISpeechServer) -> None:
    await spoken(openai(server))

    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/audio/speech")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json == {
        "model": "gpt-4o-mini-tts",
        "input": SENTENCE,
        "voice": "alloy",
        "response_format": "pcm",
    }


async def test_audio_arrives_in_several_chunks_of_whole_samples(
    server: FakeOpenAISpeechServer,
) -> None:
    assert_whole_samples(await spoken(openai(server)))


async def test_chunks_that_split_samples_are_realigned(server: FakeOpenAISpeechServer) -> None:
    server.inject(OddFrames())

    assert_whole_samples(await spoken(openai(server)))


async def test_sentences_reuse_one_connection(server: FakeOpenAISpeechServer) -> None:
    tts = openai(server)

    await spoken(tts, "One.")
    await spoken(tts, "Two.")

    assert len(server.connections) == 1
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("options", "asked", "voice", "model"),
    [
        ({}, "coral", "coral", "gpt-4o-mini-tts"),
        ({"default_voice": "sage", "model": "tts-1"}, None, "sage", "tts-1"),
    ],
)
async def test_voice_and_model_are_the_asked_ones_or_the_defaults(
    server: FakeOpenAISpeechServer,
    options: dict[str, str],
    asked: str | None,
    voice: str,
    model: str,
) -> None:
    await spoken(openai(server, **options), voice=asked)

    assert (server.requests[0].json["voice"], server.requests[0].json["model"]) == (voice, model)


async def test_unknown_voice_fails_with_openais_message(
    server: FakeOpenAISpeechServer, caplog: pytest.LogCaptureFixture
) -> None:
    error = await failure(openai(server), caplog, secrets=SECRETS, voice="tara")

    assert "HTTP 400" in str(error)
    assert "Invalid value: 'tara'" in str(error)
    assert error.retryable is False


# ---------------------------------------------------------------- configuration


async def test_missing_key_is_named(
    server: FakeOpenAISpeechServer, caplog: pytest.LogCaptureFixture
) -> None:
    tts = OpenAITTS(api_key="", base_url=server.base_url)

    error = await failure(tts, caplog, secrets=SECRETS)

    assert "OPENAI_API_KEY" in str(error)
    assert server.requests == []


async def test_blank_text_yields_nothing_without_a_request(
    server: FakeOpenAISpeechServer,
) -> None:
    assert await spoken(openai(server), "\n") == []
    assert server.requests == []


# ---------------------------------------------------------------- failures


async def test_wrong_key_fails_without_openais_half_masked_quote(
    server: FakeOpenAISpeechServer, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "sk-wrong-key-zq9x"
    tts = OpenAITTS(api_key=wrong, base_url=server.base_url)

    error = await failure(tts, caplog, secrets=[wrong, "zq9x"])

    assert "HTTP 401" in str(error)
    assert "OPENAI_API_KEY" in str(error)
    assert error.retryable is False


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (404, False), (429, True), (500, True), (503, True)]
)
async def test_http_error_carries_status_and_openais_message(
    server: FakeOpenAISpeechServer,
    caplog: pytest.LogCaptureFixture,
    status: int,
    retryable: bool,
) -> None:
    server.inject(HttpError(status, "Rate limit reached for gpt-4o-mini-tts."))

    error = await failure(openai(server), caplog, secrets=SECRETS)

    assert f"HTTP {status}" in str(error)
    assert "Rate limit reached for gpt-4o-mini-tts." in str(error)
    assert error.retryable is retryable


async def test_provider_message_quoting_the_text_is_cleaned_and_bounded(
    server: FakeOpenAISpeechServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.inject(HttpError(400, f"Cannot speak {SENTENCE!r}. " + "x" * 5000))

    error = await failure(openai(server), caplog, secrets=SECRETS)

    assert "[redacted]" in str(error)
    assert len(str(error)) < 300


async def test_silence_before_the_status_line_times_out(
    server: FakeOpenAISpeechServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.inject(Hang())

    await silence_failure(openai(server, timeout_s=0.3), caplog, secrets=SECRETS, timeout_s=0.3)


async def test_silence_mid_body_fails_after_the_audio_so_far(
    server: FakeOpenAISpeechServer,
) -> None:
    server.inject(Hang(after_frames=1))

    received, error = await audio_before_failure(openai(server, timeout_s=0.3))

    assert len(received) == 1
    assert error.retryable is True


async def test_connection_dropped_mid_body_fails_and_next_sentence_works(
    server: FakeOpenAISpeechServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.inject(Cut(after_frames=2))
    tts = openai(server)

    error = await failure(tts, caplog, secrets=SECRETS)

    assert "broke" in str(error)
    assert error.retryable is True
    assert b"".join(await spoken(tts, "Still here.")) == speech_pcm("Still here.")


# ---------------------------------------------------------------- barge-in


async def test_closing_early_closes_the_connection_promptly(
    server: FakeOpenAISpeechServer,
) -> None:
    server.inject(Hang(after_frames=1))

    await assert_stopping_early_closes_promptly(
        openai(server), lambda: server.connections[0].closed
    )
