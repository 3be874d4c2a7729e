"""Providers that hang, answer garbage or hang up, met by a whole session over the consumer.

Each adapter has its own tests against its fake server (in its folder under
tests/engine/providers/); here the point is what the person at the page
sees: an `error` with the provider kind's code (`llm_failed`, `stt_failed`, `tts_failed`)
soon, never a hang or a closed socket, and the next typed turn works.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from engine.protocol import PROVIDER_FAILURES
from tests.engine.providers.llm.openai.fake_server import (
    Chunk,
    Cut,
    Delay,
    FakeOpenAIServer,
    PlainBody,
    Raw,
    Step,
    Text,
    text_reply,
)
from tests.engine.providers.stt.assemblyai.fake_server import (
    CloseWith,
    FakeAssemblyAIServer,
    Partial,
    WaitAudio,
)
from tests.engine.providers.tts.orpheus.fake_server import FakeOrpheusServer
from tests.factories import Tenant, make_tenant
from tests.fakes.ws_server import Garbage, Hang
from tests.sessions_app.recording import recorded_errors
from tests.sessions_app.wsclient import Client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("http_pools_closed")]

LLM_KEY = "sk-llm-key-9d8c7b6a"
AAI_KEY = "aai-key-5f4e3d2c1b"
ORPHEUS_KEY = "orpheus-key-0a1b2c"
SAID = "my account number is 4417 1234"  # what the user typed: never in an error


@pytest.fixture(autouse=True)
def _met_once(settings: Any) -> None:
    # Each fault is met once, on the path that reports it: what a retry or a fallback
    # makes of a passing fault is tests/sessions_app/test_resilience.py's business.
    settings.PROVIDER_RETRY_DELAYS_MS = []


@pytest.fixture
async def llm(settings: Any) -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        settings.LLM_BASE_URL = server.base_url
        settings.LLM_API_KEY = LLM_KEY
        settings.LLM_TIMEOUT_S = 1.0
        yield server


@pytest.fixture
async def tenant() -> Tenant:
    return await sync_to_async(make_tenant)("faults@example.com")


@contextlib.asynccontextmanager
async def session(tenant: Tenant, mode: str = "text") -> AsyncIterator[Client]:
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": mode})
        await client.until("ready")
        yield client


async def failed_turn(client: Client, text: str = SAID) -> tuple[dict[str, Any], float]:
    """Type a turn whose provider misbehaves: its `error`, and how long that took."""
    started = time.monotonic()
    await client.send({"type": "text", "text": text})
    error = await client.until("error", timeout=10)
    took = time.monotonic() - started
    await client.until("metrics", timeout=10)  # the turn is over, one way or another
    return error, took


def assert_discreet(error: dict[str, Any], *secrets: str) -> None:
    for secret in (SAID, *secrets):
        assert secret not in error["message"]


# ---------------------------------------------------------------- the LLM

LLM_FAULTS: dict[str, list[Step]] = {
    # A proxy or a wrong LLM_BASE_URL answering with a web page.
    "html_page_with_200": [PlainBody(b"<html><body><h1>Sign in</h1></body></html>")],
    "plain_text_with_200": [PlainBody(b"upstream connect error", content_type="text/plain")],
    "non_json_event": [Text("Let me"), Raw(b"data: {this is not json\n\n")],
    "event_of_the_wrong_shape": [Text("Let me"), Chunk(["not", "a", "chunk"])],
    "stream_cut_mid_answer": [Text("Your order is on its w"), Cut()],
    "connection_cut_before_any_answer": [Cut()],
    "silent_past_the_timeout": [Delay(5)],
    "stalls_mid_answer_past_the_timeout": [Text("Your order"), Delay(5)],
}


@pytest.mark.parametrize("fault", LLM_FAULTS.values(), ids=LLM_FAULTS.keys())
async def test_a_misbehaving_llm_is_an_error_and_the_next_turn_works(
    tenant: Tenant, llm: FakeOpenAIServer, fault: list[Step]
) -> None:
    llm.script(*fault)
    llm.script(text_reply("Back again."))
    async with session(tenant) as client:
        error, took = await failed_turn(client)
        assert error["code"] == "llm_failed"
        assert took < 4  # LLM_TIMEOUT_S is 1 s here: no hang
        assert_discreet(error, LLM_KEY)
        metrics = client.events[-1]
        assert metrics["type"] == "metrics" and metrics["outcome"] == "failed"
        assert "chat" not in client.types()

        await client.send({"type": "text", "text": "are you there?"})
        assert (await client.until("chat", timeout=10))["text"] == "Back again."
    # The next request still has the user's words, and of the failed reply just what the
    # user saw, marked as cut off.
    shown = "".join(step.text for step in fault if isinstance(step, Text))
    expected = [
        {"role": "user", "content": SAID},
        *([{"role": "assistant", "content": f"{shown} [interrupted]"}] if shown else []),
        {"role": "user", "content": "are you there?"},
    ]
    assert llm.requests[-1].json["messages"] == expected


async def test_an_html_page_instead_of_a_stream_is_named_as_such(
    tenant: Tenant, llm: FakeOpenAIServer
) -> None:
    llm.script(PlainBody(b"<html><body>Sign in to Corp Proxy</body></html>"))
    async with session(tenant) as client:
        error, _ = await failed_turn(client)
    assert error["message"] == PROVIDER_FAILURES["llm_failed"]
    ((_code, detail),) = await recorded_errors(tenant.workspace)  # the session's page
    assert "text/html" in detail
    assert "Corp Proxy" not in detail  # the page itself is not quoted


# ---------------------------------------------------------------- speech recognition


@pytest.fixture
async def assemblyai(settings: Any) -> AsyncIterator[FakeAssemblyAIServer]:
    async with FakeAssemblyAIServer(api_key=AAI_KEY) as server:
        settings.STT_PROVIDER = "assemblyai"
        settings.ASSEMBLYAI_API_KEY = AAI_KEY
        settings.ASSEMBLYAI_BASE_URL = server.base_url
        settings.STT_TIMEOUT_S = 1.0
        yield server


async def test_a_recogniser_that_hangs_up_mid_speech_is_an_error_and_typing_still_works(
    tenant: Tenant, llm: FakeOpenAIServer, assemblyai: FakeAssemblyAIServer
) -> None:
    assemblyai.script(WaitAudio(100), Partial("my account"), CloseWith(3005, error="Internal"))
    llm.script(text_reply("Typed answer."))
    async with session(tenant, mode="voice") as client:
        for _ in range(10):
            await client.send_raw(data=bytes(640))  # 20 ms of 16 kHz PCM
        error = await client.until("error", timeout=5)
        assert error["code"] == "stt_failed"
        assert error["message"] == PROVIDER_FAILURES["stt_failed"]
        assert_discreet(error, AAI_KEY, "my account")
        for _ in range(5):  # audio after the failure is dropped, not an error storm
            await client.send_raw(data=bytes(640))
        await client.send({"type": "text", "text": "typed instead"})
        assert (await client.until("chat", timeout=10))["text"] == "Typed answer."
    assert [e["code"] for e in client.events if e["type"] == "error"] == ["stt_failed"]
    ((_code, detail),) = await recorded_errors(tenant.workspace)  # the session's page
    assert "3005" in detail and AAI_KEY not in detail and "my account" not in detail


async def test_a_recogniser_that_never_answers_is_an_error_and_typing_still_works(
    tenant: Tenant, llm: FakeOpenAIServer, assemblyai: FakeAssemblyAIServer
) -> None:
    assemblyai.token_delay = 10  # the token request hangs past STT_TIMEOUT_S
    llm.script(text_reply("Typed answer."))
    started = time.monotonic()
    async with session(tenant, mode="voice") as client:
        error = await client.until("error", timeout=5)
        assert error["code"] == "stt_failed" and time.monotonic() - started < 4
        assert_discreet(error, AAI_KEY)
        await client.send({"type": "text", "text": "typed instead"})
        assert (await client.until("chat", timeout=10))["text"] == "Typed answer."


# ---------------------------------------------------------------- speech synthesis


@pytest.fixture
async def orpheus(settings: Any) -> AsyncIterator[FakeOrpheusServer]:
    async with FakeOrpheusServer(api_key=ORPHEUS_KEY) as server:
        settings.TTS_PROVIDER = "orpheus"
        settings.ORPHEUS_URL = server.url
        settings.ORPHEUS_API_KEY = ORPHEUS_KEY
        settings.TTS_TIMEOUT_S = 1.0
        yield server


# (A voice that hangs up with a close code is in tests/sessions_app/test_speech_wiring.py.)
@pytest.mark.parametrize(
    "fault", [Hang(after_frames=0), Hang(after_frames=2), Garbage(after_frames=1)],
    ids=["silent", "stalls_mid_sentence", "garbage_mid_sentence"],
)  # fmt: skip
async def test_a_misbehaving_voice_is_an_error_the_reply_still_arrives_and_the_next_is_spoken(
    tenant: Tenant, llm: FakeOpenAIServer, orpheus: FakeOrpheusServer, fault: Any
) -> None:
    orpheus.inject(fault)
    llm.script(text_reply("First answer."))
    llm.script(text_reply("Second answer."))
    async with session(tenant, mode="voice") as client:
        error, took = await failed_turn(client, "one")
        assert error["code"] == "tts_failed" and took < 4
        assert_discreet(error, ORPHEUS_KEY)
        assert any(e["type"] == "chat" and e["text"] == "First answer." for e in client.events)
        audio_before = sum(len(frame) for frame in client.audio)

        start = len(client.events)
        await client.send({"type": "text", "text": "two"})
        await client.until("tts_done", timeout=10)
        assert "error" not in [e["type"] for e in client.events[start:]]
        assert sum(len(frame) for frame in client.audio) > audio_before
