"""A session keeps one ElevenLabs socket (the fake speaks the multi-context protocol):
opened while the greeting is prepared, reused by every sentence of every turn, closed
when the session ends."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async

from sessions_app import services as agent_services
from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer, text_reply
from tests.engine.providers.tts.elevenlabs.fake_server import FakeElevenLabsServer
from tests.factories import Tenant, make_tenant
from tests.sessions_app.wsclient import Client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def tenant() -> Tenant:
    return await sync_to_async(make_tenant)("warm@example.com")


def flushed(server: FakeElevenLabsServer) -> list[str]:
    messages = [json.loads(m) for c in server.connections for m in c.received]
    return [m["text"].strip() for m in messages if m.get("flush")]


async def test_one_socket_speaks_the_greeting_and_every_sentence_of_every_turn(
    tenant: Tenant, llm: FakeOpenAIServer, elevenlabs: FakeElevenLabsServer
) -> None:
    await sync_to_async(agent_services.agent_create)(
        workspace=tenant.workspace, name="Nova", slug="nova", tts_provider="elevenlabs",
        greeting="Welcome back.",
    )  # fmt: skip
    llm.script(text_reply("First things first. Then the second."))
    llm.script(text_reply("And a third."))
    async with Client(f"/v1/session?key={tenant.publishable_key}&agent=nova") as client:
        await client.send({"type": "configure"})
        await client.until("ready")
        for said in ("hi", "more"):
            start = len(client.events)
            await client.send({"type": "text", "text": said})
            await client.until("metrics", timeout=10)
            assert "error" not in [e["type"] for e in client.events[start:]]
    assert flushed(elevenlabs) == [
        "Welcome back.", "First things first.", "Then the second.", "And a third.",
    ]  # fmt: skip
    (connection,) = elevenlabs.connections
    await asyncio.wait_for(connection.closed.wait(), 5)  # the session's end closed it
    assert json.loads(connection.received[-1]) == {"close_socket": True}
