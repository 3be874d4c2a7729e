"""A server tool through Redis and a real Celery worker process, driven by a session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from secrets_app import services as secret_services
from tests.engine.providers.llm.openai.fake_server import (
    Done,
    FakeOpenAIServer,
    Finish,
    text_reply,
    tool_call,
)
from tests.factories import make_tenant
from tests.fakes.egress_server import EgressTestServer, respond
from tests.sessions_app.wsclient import Client
from tests.tools_app.jailed import BUSY_LOOP, assert_not_slowed_by_busy_loops, session_runner

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "wx-live-5e1f0c"

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]


async def test_tool_fetches_with_a_host_bound_secret_through_a_real_worker(worker, settings):
    tenant = await sync_to_async(make_tenant)("e2e@example.com")
    await sync_to_async(secret_services.secret_set)(
        workspace=tenant.workspace, name="WEATHER_KEY", value=API_KEY, allowed_hosts=["127.0.0.1"]
    )
    llm = FakeOpenAIServer()
    await llm.start()
    settings.LLM_BASE_URL = llm.base_url
    settings.TOOL_RUNNER = "sandbox"
    async with EgressTestServer() as api:
        api.route(
            "/v1/weather",
            respond(200, b'{"temp": 21, "sky": "clear"}', [("Content-Type", "application/json")]),
        )
        await sync_to_async(worker)(api.port)
        handler = (
            "async (args, ctx) => {"
            f"  const r = await ctx.fetch('{api.url('/v1/weather')}?city=' + args.city,"
            "    {headers: {'x-api-key': ctx.secrets.WEATHER_KEY}});"
            "  return await r.json(); }"
        )
        tool = {"name": "get_weather", "parameters": {"city": "string"}, "handler": handler}
        llm.script(
            *tool_call(0, "call_w", "get_weather", '{"city": "Paris"}'),
            Finish("tool_calls"),
            Done(),
        )
        llm.script(text_reply("It is 21 degrees and clear."))
        path = f"/v1/session?key={tenant.publishable_key}"
        async with Client(path) as client:
            await client.send({"type": "configure", "mode": "text", "tools": [tool]})
            await client.until("ready")
            await client.send({"type": "text", "text": "Weather in Paris?"})
            chat = await client.until("chat", timeout=30)
        assert chat["text"] == "It is 21 degrees and clear."
        assert api.requests[-1].headers["x-api-key"] == API_KEY
        assert api.requests[-1].target == "/v1/weather?city=Paris"
        tool_message = llm.requests[1].json["messages"][-1]
        assert json.loads(tool_message["content"]) == {"temp": 21, "sky": "clear"}
    await llm.stop()


async def test_a_hostile_handler_does_not_harm_the_worker(worker, settings):
    tenant = await sync_to_async(make_tenant)("hostile@example.com")
    llm = FakeOpenAIServer()
    await llm.start()
    settings.LLM_BASE_URL = llm.base_url
    settings.TOOL_RUNNER = "sandbox"
    await sync_to_async(worker)(443)
    tools = [
        {"name": "spin", "handler": "async () => { await 0; while (true) {} }", "timeoutMs": 500},
        {"name": "bomb", "handler": "() => { const a = []; while (true) a.push('x'.repeat(1e6)) }"},
        {"name": "ok", "handler": "(args) => ({ fine: true })"},
    ]
    for name in ("spin", "bomb", "ok"):
        llm.script(*tool_call(0, f"call_{name}", name, "{}"), Finish("tool_calls"), Done())
        llm.script(text_reply(f"after {name}"))
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "text", "tools": tools})
        await client.until("ready")
        for name in ("spin", "bomb", "ok"):
            await client.send({"type": "text", "text": name})
            assert (await client.until("chat", timeout=60))["text"] == f"after {name}"
    statuses = {
        e["name"]: e["status"]
        for e in client.events
        if e["type"] == "tool_status" and e["status"] != "started"
    }
    assert statuses == {"spin": "timed_out", "bomb": "failed", "ok": "completed"}
    assert json.loads(llm.requests[-1].json["messages"][-1]["content"]) == {"fine": True}
    await llm.stop()


async def test_parallel_calls_of_one_step_through_the_worker(worker, settings):
    tenant = await sync_to_async(make_tenant)("parallel@example.com")
    llm = FakeOpenAIServer()
    await llm.start()
    settings.LLM_BASE_URL = llm.base_url
    settings.TOOL_RUNNER = "sandbox"
    await sync_to_async(worker)(443, 2)
    calls = [step for n in range(4) for step in tool_call(n, f"call_{n}", "one", "{}")]
    llm.script(*calls, Finish("tool_calls"), Done())
    llm.script(text_reply("All four answered."))
    tool = {"name": "one", "handler": "async () => 1"}
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "text", "tools": [tool]})
        await client.until("ready")
        await client.send({"type": "text", "text": "four at once"})
        assert (await client.until("chat", timeout=30))["text"] == "All four answered."
    results = [m["content"] for m in llm.requests[1].json["messages"] if m["role"] == "tool"]
    assert results == ["1"] * 4
    await llm.stop()


def _invocation(workspace_id: int, handler: str, n: int) -> Any:
    from engine.tools.call import ToolRequest

    return ToolRequest(
        call_id=f"call-{workspace_id}-{n}",
        session_id="fair",
        workspace_id=workspace_id,
        name="t",
        handler=handler,
        arguments={"n": n},
        timeout_s=20,
        pinned=False,
    )


async def test_one_workspace_at_its_cap_does_not_slow_another_through_celery(worker, settings):
    """With the worker count docs/sandbox.md asks for (SANDBOX_WORKSPACE_CONCURRENCY + 2
    processes, "The worker")."""
    busy_ws = (await sync_to_async(make_tenant)("busy@example.com")).workspace.pk
    calm_ws = (await sync_to_async(make_tenant)("calm@example.com")).workspace.pk
    await sync_to_async(worker)(443, settings.SANDBOX_WORKSPACE_CONCURRENCY + 2)
    async with session_runner() as runner:
        await runner.run(_invocation(calm_ws, "() => 0", 0))

        async def calm(n: int) -> str | None:
            return (await runner.run(_invocation(calm_ws, "(a) => a.n", n))).result

        await assert_not_slowed_by_busy_loops(
            busy=lambda n: runner.run(_invocation(busy_ws, BUSY_LOOP, n)),
            calm=calm,
            loops=settings.SANDBOX_WORKSPACE_CONCURRENCY * 2,
            settle_s=1.0,
        )
