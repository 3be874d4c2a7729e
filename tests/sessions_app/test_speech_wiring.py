"""Cloud speech providers chosen by settings and by the agent, over the real consumer:
a provider failure is an `error` and the conversation goes on."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from asgiref.sync import sync_to_async

from sessions_app import services as agent_services
from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer, text_reply
from tests.engine.providers.tts.orpheus.fake_server import FakeOrpheusServer
from tests.factories import Tenant, make_tenant
from tests.fakes.ws_server import Cut
from tests.sessions_app.recording import recorded_errors
from tests.sessions_app.wsclient import Client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def llm(settings) -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        settings.LLM_BASE_URL = server.base_url
        settings.LLM_API_KEY = "test-llm-key"
        yield server


@pytest.fixture
async def orpheus(settings) -> AsyncIterator[FakeOrpheusServer]:
    async with FakeOrpheusServer(api_key="orpheus-key") as server:
        settings.ORPHEUS_URL = server.url
        settings.ORPHEUS_API_KEY = "orpheus-key"
        settings.TTS_TIMEOUT_S = 1.0
        yield server


@pytest.fixture
async def tenant() -> Tenant:
    return await sync_to_async(make_tenant)("speech@example.com")


async def spoken_turn(client: Client, text: str) -> list[str]:
    """Type a turn in voice mode; the event types up to its metrics."""
    start = len(client.events)
    await client.send({"type": "text", "text": text})
    await client.until("metrics")
    return [event["type"] for event in client.events[start:]]


async def test_an_agents_tts_provider_and_voice_are_used(tenant, llm, orpheus) -> None:
    await sync_to_async(agent_services.agent_create)(
        workspace=tenant.workspace, name="Jess", slug="jess", tts_provider="orpheus", voice="jess"
    )
    llm.script(text_reply("Hello from Jess."))
    async with Client(f"/v1/session?key={tenant.publishable_key}&agent=jess") as client:
        await client.send({"type": "configure"})
        await client.until("ready")
        types = await spoken_turn(client, "hi")
    assert "tts_done" in types and "error" not in types
    assert sum(len(frame) for frame in client.audio) > 0
    (connection,) = orpheus.connections
    assert json.loads(connection.received[0])["voice"] == "jess"
    assert connection.received[1:] == ["Hello", "from", "Jess.", "__END__"]


async def test_a_failing_tts_is_an_error_and_the_conversation_goes_on(
    settings, tenant, llm, orpheus
) -> None:
    settings.TTS_PROVIDER = "orpheus"
    llm.script(text_reply("First answer."))
    llm.script(text_reply("Second answer."))
    for _attempt in range(1 + len(settings.PROVIDER_RETRY_DELAYS_MS)):  # it fails every retry
        orpheus.inject(Cut(after_frames=0, code=1011, reason="model crashed"))
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "voice"})
        await client.until("ready")
        failed = await spoken_turn(client, "one")
        errors = [e for e in client.events if e["type"] == "error"]
        audio_after_failure = len(client.audio)
        recovered = await spoken_turn(client, "two")
    assert [e["code"] for e in errors] == ["tts_failed"]
    assert "orpheus-key" not in errors[0]["message"]
    assert "chat" in failed and "tts_done" in failed  # the reply still arrives, as text
    assert "error" not in recovered and len(client.audio) > audio_after_failure


async def test_a_missing_provider_setting_is_named(settings, tenant, llm) -> None:
    settings.TTS_PROVIDER = "orpheus"
    settings.ORPHEUS_URL = ""
    llm.script(text_reply("Hi."))
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "voice"})
        await client.until("ready")
        await spoken_turn(client, "hello")
    (error,) = [e for e in client.events if e["type"] == "error"]
    assert error["code"] == "tts_failed" and "ORPHEUS_URL" not in error["message"]
    # The page hears a fixed sentence; the session's dashboard page names the setting.
    ((code, detail),) = await recorded_errors(tenant.workspace)
    assert code == "tts_failed" and "ORPHEUS_URL is not set" in detail
    assert any(e["type"] == "chat" and e["text"] == "Hi." for e in client.events)


async def test_an_agents_vocabulary_reaches_its_recogniser(settings, tenant, llm) -> None:
    from engine.providers.stt.local import adapter as stt_local

    settings.STT_PROVIDER, settings.TTS_PROVIDER = "local", "fake"
    prompts: list[str | None] = []
    real_open = stt_local.LocalSTT.open

    async def open_recorded(self, *, sample_rate):  # the real stream, its prompt noted
        stream = await real_open(self, sample_rate=sample_rate)
        prompts.append(stream._prompt)
        return stream

    await sync_to_async(agent_services.agent_create)(
        workspace=tenant.workspace, name="Coder", slug="coder", vocabulary=["index.js", "greet()"]
    )
    stt_local.LocalSTT.open = open_recorded  # type: ignore[method-assign]
    try:
        async with Client(f"/v1/session?key={tenant.publishable_key}&agent=coder") as client:
            await client.send({"type": "configure"})
            await client.until("ready")
    finally:
        stt_local.LocalSTT.open = real_open  # type: ignore[method-assign]
    assert prompts == ["Vocabulary: index.js, greet()."]
