from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
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
async def llm(settings: Any) -> AsyncIterator[FakeOpenAIServer]:
    """A fake OpenAI-compatible LLM server the sessions of the test talk to."""
    server = FakeOpenAIServer()
    await server.start()
    settings.LLM_BASE_URL = server.base_url
    settings.LLM_API_KEY = "test-llm-key"
    yield server
    await server.stop()
