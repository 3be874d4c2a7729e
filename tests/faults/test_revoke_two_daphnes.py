"""Revoking a key ends its live sessions on every web process within 2 s.

Two real daphne processes share a private redis-server (channel layer, leases) and one
database. Sessions of the key run on both; the key is revoked through the REST API on the
first process. Every one of them hears `error` `key_revoked` and is closed with 4001
within 2 s; another workspace's session on the same processes keeps talking.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.engine.providers.llm.openai.fake_server import DEFAULT_SCRIPT, FakeOpenAIServer
from tests.faults.processes import (
    Daphne,
    Platform,
    RedisServer,
    SessionClient,
    free_port,
    prepare_platform,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

TEXT = {"type": "configure", "mode": "text", "instructions": "Be brief."}


class Stack:
    def __init__(self, var: Any) -> None:
        self.redis = RedisServer(var).start()
        self.llm_port = free_port()
        self.platform: Platform = prepare_platform(
            var, redis_url=self.redis.url, llm_base_url=f"http://127.0.0.1:{self.llm_port}/v1"
        )
        self.daphnes = [Daphne(self.platform, "daphne-a"), Daphne(self.platform, "daphne-b")]

    def stop(self) -> None:
        for daphne in self.daphnes:
            daphne.stop()
        self.redis.stop()


@pytest.fixture
def stack(tmp_path: Any) -> Iterator[Stack]:
    stack = Stack(tmp_path)
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture
async def llm(stack: Stack) -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(port=stack.llm_port, default=DEFAULT_SCRIPT) as server:
        yield server


def _api(daphne: Daphne, platform: Platform, method: str, path: str) -> Any:
    response = httpx.request(
        method,
        f"{daphne.url}/api/v1/{path}",
        headers={"Authorization": f"Bearer {platform.secret_key}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return response.json()


async def _talks(client: SessionClient, text: str) -> None:
    await client.send({"type": "text", "text": text})
    chat = await client.until("chat", timeout=15)
    assert text in chat["text"]


async def test_a_revoked_key_ends_its_sessions_on_both_processes_within_2_s(
    stack: Stack, llm: FakeOpenAIServer
) -> None:
    a, b = stack.daphnes
    platform = stack.platform
    urls = [
        a.session_url(platform.publishable_key),
        b.session_url(platform.publishable_key),
        b.session_url(platform.outsider_key),
    ]
    async with contextlib.AsyncExitStack() as opened:
        on_a, on_b, bystander = [
            await opened.enter_async_context(SessionClient.open(url)) for url in urls
        ]
        for client in (on_a, on_b, bystander):
            await client.send(TEXT)
            await client.until("ready")
        await _talks(on_b, "hello from b")
        live = _api(a, platform, "GET", "sessions?live=true")["results"]
        assert len(live) == 2  # the workspace's two (the bystander is another workspace's)

        (key,) = [k for k in _api(a, platform, "GET", "keys") if k["kind"] == "publishable"]
        revoked_at = time.monotonic()
        _api(a, platform, "POST", f"keys/{key['id']}/revoke")
        for client in (on_a, on_b):
            error = await client.until("error", timeout=5)
            assert error["code"] == "key_revoked"
            assert await client.next(5) is None and client.close_code == 4001
            elapsed = time.monotonic() - revoked_at
            assert elapsed < 2.0, f"took {elapsed:.2f} s"
            print(f"session ended {elapsed * 1000:.0f} ms after the revoke")

        await _talks(bystander, "still here")
        await asyncio.sleep(0.5)  # the ended sessions' records are written off the loop
        assert _api(b, platform, "GET", "sessions?live=true")["results"] == []
        ended = _api(b, platform, "GET", "sessions")["results"]
        assert sorted(s["close_code"] for s in ended) == [4001, 4001]
