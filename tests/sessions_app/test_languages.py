"""An agent in another language: a spoken session through the real consumer, AssemblyAI,
the LLM and ElevenLabs (fakes speaking their wire protocols), each told the language."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app import services as agent_services
from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer, text_reply
from tests.engine.providers.stt.assemblyai.fake_server import (
    EndOfTurn,
    FakeAssemblyAIServer,
    WaitAudio,
)
from tests.engine.providers.tts.elevenlabs.fake_server import FakeElevenLabsServer
from tests.factories import Tenant, make_tenant
from tests.sessions_app.wsclient import Client

pytestmark = pytest.mark.django_db(transaction=True)

AAI_KEY = "aai-lang-key"


@pytest.fixture
async def tenant() -> Tenant:
    return await sync_to_async(make_tenant)("idiomas@example.com")


@pytest.fixture
async def assemblyai(settings: Any) -> AsyncIterator[FakeAssemblyAIServer]:
    async with FakeAssemblyAIServer(api_key=AAI_KEY) as server:
        settings.ASSEMBLYAI_API_KEY = AAI_KEY
        settings.ASSEMBLYAI_BASE_URL = server.base_url
        yield server


async def agent(tenant: Tenant, language: str, **providers: str) -> None:
    await sync_to_async(agent_services.agent_create)(
        workspace=tenant.workspace,
        name="Lucía",
        slug="lucia",
        instructions="You help callers book tables.",
        language=language,
        **providers,
    )


async def test_a_spanish_session_hears_thinks_and_speaks_spanish(
    tenant: Tenant,
    llm: FakeOpenAIServer,
    assemblyai: FakeAssemblyAIServer,
    elevenlabs: FakeElevenLabsServer,
) -> None:
    await agent(tenant, "es", stt_provider="assemblyai", tts_provider="elevenlabs")
    assemblyai.script(WaitAudio(200), EndOfTurn("hola quiero una mesa", "Hola, quiero una mesa."))
    llm.script(text_reply("Claro, ¿para cuántas personas?"))
    async with Client(f"/v1/session?key={tenant.publishable_key}&agent=lucia") as client:
        await client.send({"type": "configure"})
        await client.until("ready")
        for _ in range(20):
            await client.send_raw(data=bytes(640))  # 20 ms of 16 kHz PCM
        turn = await client.until("turn", timeout=10)
        await client.until("tts_done", timeout=10)
    assert turn["text"] == "Hola, quiero una mesa."
    (session,) = assemblyai.sessions
    assert session.query["speech_model"] == "universal-streaming-multilingual"
    system = llm.requests[0].json["messages"][0]
    assert system["role"] == "system" and "Answer in Spanish" in system["content"]
    assert system["content"].startswith("You help callers book tables.")
    assert elevenlabs.connections and all(
        c.query["language_code"] == "es" for c in elevenlabs.connections
    )
    assert sum(len(frame) for frame in client.audio) > 0


async def test_detect_asks_for_language_detection_and_the_callers_language(
    tenant: Tenant,
    llm: FakeOpenAIServer,
    assemblyai: FakeAssemblyAIServer,
    elevenlabs: FakeElevenLabsServer,
) -> None:
    await agent(tenant, "detect", stt_provider="assemblyai", tts_provider="elevenlabs")
    async with Client(f"/v1/session?key={tenant.publishable_key}&agent=lucia") as client:
        await client.send({"type": "configure"})
        await client.until("ready")
        llm.script(text_reply("Bonjour."))
        await client.send({"type": "text", "text": "Bonjour"})
        await client.until("tts_done", timeout=10)
    (session,) = assemblyai.sessions
    assert session.query["language_detection"] == "true"
    assert "language the caller speaks" in llm.requests[0].json["messages"][0]["content"]
    assert "language_code" not in elevenlabs.connections[0].query  # the text decides


async def test_a_provider_that_cannot_hear_the_language_is_refused_in_words(
    tenant: Tenant, llm: FakeOpenAIServer, settings: Any
) -> None:
    settings.ORPHEUS_URL, settings.ORPHEUS_API_KEY = "wss://orpheus.example/ws", "key"
    await agent(tenant, "fr", stt_provider="fake", tts_provider="orpheus")
    async with Client(f"/v1/session?key={tenant.publishable_key}&agent=lucia") as client:
        await client.send({"type": "configure"})
        error = await client.until("error")
    assert error["code"] == "invalid"
    assert "French" in error["message"] and "Orpheus" in error["message"]
    assert not llm.requests
