"""Redis goes away under a live session and comes back.

Real processes: a private redis-server (the shared one is never touched), daphne and a
sandbox worker on it; the LLM and the customer's API are local fakes. While Redis is
down a session keeps talking (the LLM needs no Redis), a server tool fails at once with
a readable error instead of hanging, daphne stays up (``/healthz`` says 503), and once
Redis is back, tools work again in the old session and new sessions work end to end.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.engine.providers.llm.openai.fake_server import (
    Done,
    FakeOpenAIServer,
    Finish,
    text_reply,
    tool_call,
)
from tests.fakes.egress_server import EgressTestServer, respond
from tests.faults.processes import (
    Daphne,
    Platform,
    RedisServer,
    SessionClient,
    Worker,
    free_port,
    prepare_platform,
    wait_for,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]


class Stack:
    def __init__(self, var: Any) -> None:
        self.redis = RedisServer(var).start()
        self.llm_port = free_port()
        self.platform: Platform = prepare_platform(
            var, redis_url=self.redis.url, llm_base_url=f"http://127.0.0.1:{self.llm_port}/v1"
        )
        self.daphne = Daphne(self.platform)
        self.worker: Worker | None = None

    def start_worker(self, egress_port: int) -> Worker:
        self.worker = Worker(self.platform, egress_port=egress_port)
        return self.worker

    def url(self, key: str | None = None) -> str:
        return self.daphne.session_url(key or self.platform.publishable_key)

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()
        self.daphne.stop()
        self.redis.stop()


@pytest.fixture
async def api() -> AsyncIterator[EgressTestServer]:
    async with EgressTestServer() as server:
        body = json.dumps({"stock": 7}).encode()
        server.route("/stock", respond(200, body, [("Content-Type", "application/json")]))
        yield server


@pytest.fixture
def stack(tmp_path: Any) -> Iterator[Stack]:
    stack = Stack(tmp_path)
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture
async def llm(stack: Stack) -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(port=stack.llm_port) as server:
        yield server


def stock_tool(api: EgressTestServer) -> dict[str, Any]:
    handler = f"async (args, ctx) => (await ctx.fetch('{api.url('/stock')}')).json()"
    return {"name": "stock", "handler": handler, "timeoutMs": 3000}


def script_tool_turn(llm: FakeOpenAIServer, call_id: str, reply: str) -> None:
    llm.script(*tool_call(0, call_id, "stock", "{}"), Finish("tool_calls"), Done())
    llm.script(text_reply(reply))


async def turn(client: SessionClient, text: str) -> dict[str, Any]:
    await client.send({"type": "text", "text": text})
    return await client.until("chat", timeout=15)


def tool_statuses(client: SessionClient) -> list[str]:
    return [e["status"] for e in client.of_type("tool_status") if e["status"] != "started"]


def last_tool_message(llm: FakeOpenAIServer) -> Any:
    return json.loads(llm.requests[-1].json["messages"][-1]["content"])


async def test_a_session_outlives_a_redis_restart_and_new_sessions_work_after(
    stack: Stack, llm: FakeOpenAIServer, api: EgressTestServer
) -> None:
    worker = await asyncio.to_thread(stack.start_worker, api.port)
    tools = [stock_tool(api)]
    llm.script(text_reply("Hello before."))
    script_tool_turn(llm, "call_a", "Seven in stock.")
    llm.script(text_reply("Still here without Redis."))
    script_tool_turn(llm, "call_b", "The stock service is down, sorry.")
    script_tool_turn(llm, "call_c", "Seven in stock again.")
    async with SessionClient.open(stack.url()) as client:
        await client.send({"type": "configure", "mode": "text", "tools": tools})
        await client.until("ready")
        assert (await turn(client, "hello"))["text"] == "Hello before."
        assert (await turn(client, "stock?"))["text"] == "Seven in stock."

        stack.redis.stop()
        await asyncio.sleep(6)  # longer than a channel-layer wait and its read timeout
        assert (await turn(client, "are you there?"))["text"] == "Still here without Redis."
        started = time.monotonic()
        assert (await turn(client, "stock?"))["text"] == "The stock service is down, sorry."
        assert time.monotonic() - started < 5  # an answer, not the tool's whole deadline
        assert "unavailable" in last_tool_message(llm)["error"]
        assert stack.daphne.alive() and stack.daphne.healthz() == 503

        stack.redis.start()
        await asyncio.to_thread(
            wait_for, lambda: stack.daphne.healthz() == 200, timeout=10, what="healthz 200"
        )
        await asyncio.to_thread(
            wait_for, lambda: worker.log_text().count("Connected to redis") >= 2,
            timeout=20, what="the worker to reconnect",
        )  # fmt: skip
        assert (await turn(client, "stock now?"))["text"] == "Seven in stock again."
        assert last_tool_message(llm) == {"stock": 7}
        assert tool_statuses(client) == ["completed", "failed", "completed"]
        assert not client.of_type("error")

    # A new session after the restart, of another workspace: it works end to end and
    # shows nothing of the first one.
    llm.script(text_reply("A fresh hello."))
    script_tool_turn(llm, "call_d", "Seven, says the new session.")
    async with SessionClient.open(stack.url(stack.platform.outsider_key)) as fresh:
        await fresh.send({"type": "configure", "mode": "text", "tools": tools})
        await fresh.until("ready")
        assert (await turn(fresh, "hi"))["text"] == "A fresh hello."
        assert (await turn(fresh, "stock?"))["text"] == "Seven, says the new session."
    seen = json.dumps(fresh.events)
    assert "call_a" not in seen and "in stock" not in seen and "Redis" not in seen
    assert stack.daphne.alive() and stack.daphne.healthz() == 200


async def test_a_connection_while_redis_is_down_is_closed_at_once_and_harms_nothing(
    stack: Stack, llm: FakeOpenAIServer
) -> None:
    """Without Redis the workspace's session count cannot be checked, so no session can
    start; the page is told so in words and the socket closes with 4503 (try again later)."""
    stack.redis.stop()
    started = time.monotonic()
    async with SessionClient.open(stack.url()) as client:
        error = await client.next(timeout=10)
        assert error is not None and error["code"] == "service_unavailable"
        assert await client.next(timeout=10) is None
    assert client.close_code == 4503 and time.monotonic() - started < 5
    assert stack.daphne.alive()

    stack.redis.start()
    llm.script(text_reply("Back in business."))
    async with SessionClient.open(stack.url()) as client:
        await client.send({"type": "configure", "mode": "text"})
        await client.until("ready")
        assert (await turn(client, "hi"))["text"] == "Back in business."
    assert stack.daphne.healthz() == 200
