"""A sandbox worker dies during a tool call: the LLM hears about it, the turn completes,
nothing runs twice or late, and the next worker serves the next call.

Real processes: a private redis-server, daphne, Celery workers; the LLM and the customer's
API are local fakes. The handler waits on the customer's API, so "during the call" is
exactly "after the API saw the request".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import asdict
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.tools.call import ToolRequest
from tests.engine.providers.llm.openai.fake_server import (
    Done,
    FakeOpenAIServer,
    Finish,
    text_reply,
    tool_call,
)
from tests.fakes.egress_server import EgressTestServer, RecordedRequest, respond
from tests.faults.processes import (
    Daphne,
    Platform,
    RedisServer,
    SessionClient,
    Worker,
    free_port,
    prepare_platform,
    until,
)
from tools_app import tasks

TIMEOUT_MS = 3000
GRACE_S = 5.0  # the orchestrator's SERVER_TOOL_GRACE_S: the longest a session may wait


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Platform, Daphne, int]]:
    var = tmp_path_factory.mktemp("worker-killed")
    redis = RedisServer(var).start()
    llm_port = free_port()
    platform = prepare_platform(
        var, redis_url=redis.url, llm_base_url=f"http://127.0.0.1:{llm_port}/v1"
    )
    daphne = Daphne(platform)
    try:
        yield platform, daphne, llm_port
    finally:
        daphne.stop()
        redis.stop()


@pytest.fixture
async def llm(stack: tuple[Platform, Daphne, int]) -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(port=stack[2]) as server:
        yield server


class CustomerApi:
    """``GET /lookup?n=N``: answers ``{"n": N}`` after ``delays[N]`` seconds."""

    def __init__(self, server: EgressTestServer) -> None:
        self.server = server
        self.delays: dict[str, float] = {}
        server.route("/lookup", self._lookup)

    async def _lookup(self, request: RecordedRequest, writer: Any, server: Any) -> None:
        n = self.numbers()[-1]
        await asyncio.sleep(self.delays.get(n, 0))
        body = json.dumps({"n": int(n), "found": True}).encode()
        await respond(200, body, [("Content-Type", "application/json")])(request, writer, server)

    def numbers(self) -> list[str]:
        return [parse_qs(urlsplit(r.target).query)["n"][0] for r in self.server.requests]


@pytest.fixture
async def api() -> AsyncIterator[CustomerApi]:
    async with EgressTestServer() as server:
        yield CustomerApi(server)


@pytest.fixture
async def start_worker(
    stack: tuple[Platform, Daphne, int], api: CustomerApi
) -> AsyncIterator[Callable[[], Awaitable[Worker]]]:
    started: list[Worker] = []

    async def start() -> Worker:
        worker = await asyncio.to_thread(Worker, stack[0], egress_port=api.server.port)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def lookup_tool(port: int, timeout_ms: int = TIMEOUT_MS) -> dict[str, Any]:
    handler = (
        "async (args, ctx) => {"
        f"  const r = await ctx.fetch('http://127.0.0.1:{port}/lookup?n=' + args.n);"
        "  return await r.json(); }"
    )
    return {"name": "lookup", "parameters": {"n": "number"}, "handler": handler,
            "timeoutMs": timeout_ms}  # fmt: skip


def script_lookup(llm: FakeOpenAIServer, n: int, reply: str) -> None:
    llm.script(*tool_call(0, f"call_{n}", "lookup", json.dumps({"n": n})), Finish("tool_calls"),
               Done())  # fmt: skip
    llm.script(text_reply(reply))


async def settled(client: SessionClient, timeout_ms: int = TIMEOUT_MS) -> str:
    """The tool call's final status, waited for no longer than a session may wait."""
    while event := await client.until("tool_status", timeout=timeout_ms / 1000 + GRACE_S):
        if event["status"] != "started":
            return str(event["status"])
    raise AssertionError("unreachable")


async def start_call(client: SessionClient, text: str) -> float:
    """Send a turn that the LLM answers with a tool call; returns when the call started."""
    await client.send({"type": "text", "text": text})
    started = await client.until("tool_status", timeout=10)
    assert started["status"] == "started"
    return time.monotonic()


def tool_message(llm: FakeOpenAIServer, call_id: str) -> Any:
    """What the LLM was told about ``call_id`` in its latest request."""
    messages = llm.requests[-1].json["messages"]
    (message,) = [m for m in messages if m.get("tool_call_id") == call_id]
    return json.loads(message["content"])


async def tool_call_counts(daphne: Daphne) -> dict[str, float]:
    """``voice_tool_calls_total`` by outcome, scraped from daphne's /metrics (loopback)."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"{daphne.url}/metrics", timeout=5)).text
    return {
        sample.labels["outcome"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "voice_tool_calls_total"
    }


@contextlib.asynccontextmanager
async def session(
    stack: tuple[Platform, Daphne, int],
    api: CustomerApi,
    timeout_ms: int = TIMEOUT_MS,
    *,
    key: str | None = None,
) -> AsyncIterator[SessionClient]:
    platform, daphne, _ = stack
    url = daphne.session_url(key or platform.publishable_key)
    async with SessionClient.open(url) as client:
        tool = lookup_tool(api.server.port, timeout_ms)
        await client.send({"type": "configure", "mode": "text", "tools": [tool]})
        await client.until("ready")
        yield client


@pytest.mark.redis
@pytest.mark.slow
async def test_a_killed_worker_is_a_tool_error_and_the_next_worker_serves_the_next_call(
    stack: tuple[Platform, Daphne, int],
    llm: FakeOpenAIServer,
    api: CustomerApi,
    start_worker: Callable[[], Awaitable[Worker]],
) -> None:
    worker = await start_worker()
    before = await tool_call_counts(stack[1])
    api.delays["1"] = 30  # the handler is still waiting on the API when its worker dies
    script_lookup(llm, 1, "The lookup service failed, sorry.")
    script_lookup(llm, 2, "Still failing, sorry.")
    script_lookup(llm, 3, "Found number three.")
    outsider_key = stack[0].outsider_key
    async with session(stack, api) as client, session(stack, api, key=outsider_key) as outsider:
        started_at = await start_call(client, "Look up one")
        await until(lambda: api.numbers() == ["1"], timeout=15, what="the handler's fetch")
        worker.kill()  # SIGKILL the worker; its pool process follows (parent-death signal)
        status = await settled(client)
        took = time.monotonic() - started_at
        chat = await client.until("chat", timeout=10)
        # Nobody is left to report the call: the session's own deadline does.
        assert status == "timed_out" and took <= TIMEOUT_MS / 1000 + GRACE_S
        assert "did not answer" in tool_message(llm, "call_1")["error"]
        assert chat["text"] == "The lookup service failed, sorry."

        # No worker at all: the call waits for its deadline, not forever.
        started_at = await start_call(client, "Look up two")
        status = await settled(client)
        assert status == "timed_out"
        assert time.monotonic() - started_at <= TIMEOUT_MS / 1000 + GRACE_S
        assert (await client.until("chat", timeout=10))["text"] == "Still failing, sorry."

        await start_worker()
        await start_call(client, "Look up three")
        assert await settled(client) == "completed"
        assert (await client.until("chat", timeout=10))["text"] == "Found number three."
        assert tool_message(llm, "call_3") == {"n": 3, "found": True}
        # Another workspace's session, open all along, saw nothing of any of it.
        await outsider.drain(0.3)
        assert outsider.types() == ["ready"]
    await asyncio.sleep(1)  # room for a stale call to show up, if one were coming
    # The killed call was not run again, and the call queued while no worker ran was
    # dropped after its deadline instead of running late on the new worker.
    assert api.numbers() == ["1", "3"]
    assert stack[1].healthz() == 200
    # The operator sees it too, in daphne's /metrics.
    after = await tool_call_counts(stack[1])
    assert after["timed_out"] - before["timed_out"] == 2
    assert after["completed"] - before["completed"] == 1


@pytest.mark.redis
@pytest.mark.slow
async def test_a_killed_pool_process_fails_the_call_long_before_its_deadline(
    stack: tuple[Platform, Daphne, int],
    llm: FakeOpenAIServer,
    api: CustomerApi,
    start_worker: Callable[[], Awaitable[Worker]],
) -> None:
    """The kernel's OOM killer picks the pool process running V8: the worker survives and
    reports the call failed, long before its deadline (here 20 s + the grace)."""
    worker = await start_worker()
    api.delays["4"] = 30
    script_lookup(llm, 4, "That lookup crashed.")
    script_lookup(llm, 5, "Found number five.")
    async with session(stack, api, timeout_ms=20_000) as client:
        await start_call(client, "Look up four")
        await until(lambda: api.numbers() == ["4"], timeout=15, what="the handler's fetch")
        (pool_process,) = worker.children()
        killed_at = time.monotonic()
        os.kill(pool_process, signal.SIGKILL)
        status = await settled(client, timeout_ms=20_000)
        reported_after = time.monotonic() - killed_at
        await client.until("chat", timeout=10)
        assert status == "failed"
        # Celery sees the exit at once, or else at its next pool check (every 5 s).
        assert reported_after < 6.5, reported_after
        assert "worker stopped" in tool_message(llm, "call_4")["error"]

        await start_call(client, "Look up five")
        assert await settled(client) == "completed"
        assert (await client.until("chat", timeout=10))["text"] == "Found number five."
    assert worker.alive()
    assert api.numbers() == ["4", "5"]  # the lost call was not repeated


def test_a_call_that_reaches_a_worker_late_runs_only_in_the_time_left(monkeypatch) -> None:
    """What the process tests cannot time exactly: the deadline a queued call carries."""
    ran: list[dict[str, Any]] = []
    sent: list[str] = []

    def run_tool(run: ToolRequest, reply_channel: str) -> None:
        ran.append(asdict(run))
        sent.append(run.call_id)

    monkeypatch.setattr(tasks, "run_tool", run_tool)
    payload = {"call_id": "c1", "workspace_id": 1, "name": "t", "handler": "() => 1",
               "arguments": {}, "timeout_s": 10.0, "pinned": False}  # fmt: skip

    tasks.execute(payload, "reply-channel", not_after=time.time() - 1)
    assert ran == [] and sent == []  # the session stopped waiting: not run at all

    tasks.execute(payload, "reply-channel", not_after=time.time() + 3)
    assert 2.0 < ran[-1]["timeout_s"] <= 3 - tasks.RETURN_MARGIN_S
    tasks.execute(payload, "reply-channel")  # a message queued before this change
    assert ran[-1]["timeout_s"] == 10.0 and sent == ["c1", "c1"]
