from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.engine.providers.llm.openai.fake_server import DEFAULT_SCRIPT, FakeOpenAIServer
from tests.engine.providers.tts.elevenlabs.fake_server import FakeElevenLabsServer
from tests.sessions_app.harness import Harness


@pytest.fixture(autouse=True)
def _pools_closed(http_pools_closed: None) -> None:
    """Every test here may reach the LLM and speech adapters."""


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def factory(**kwargs: Any) -> Harness:
        made.append(Harness(**kwargs))
        return made[-1]

    yield factory
    for harness in made:
        await harness.session.close()


@pytest.fixture
async def echo(settings: Any) -> AsyncIterator[FakeOpenAIServer]:
    """An LLM that answers every request ("You said: …")."""
    server = FakeOpenAIServer(default=DEFAULT_SCRIPT)
    await server.start()
    settings.LLM_BASE_URL, settings.LLM_API_KEY = server.base_url, "test-llm-key"
    yield server
    await server.stop()


@pytest.fixture
async def no_leases() -> None:
    """No session places held from an earlier test (Redis, or this process's memory)."""
    from django.conf import settings as django_settings

    from core import leases as live

    if django_settings.REDIS_URL:
        client = live.redis_client()
        for key in await client.keys("voice:live:*"):
            await client.delete(key)
    live._memory.clear()


ELEVENLABS_KEY = "xi-session-key"


@pytest.fixture
async def elevenlabs(settings: Any) -> AsyncIterator[FakeElevenLabsServer]:
    """The platform's ElevenLabs account, pointed at a fake of its WebSocket."""
    async with FakeElevenLabsServer(api_key=ELEVENLABS_KEY) as server:
        settings.ELEVENLABS_API_KEY = ELEVENLABS_KEY
        settings.ELEVENLABS_BASE_URL = server.url
        yield server
