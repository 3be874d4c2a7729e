"""Quotas hold at the same instant: sessions asking at once take what the counters allow,
not what the records (written after each turn) had seen. Embedded and over Redis."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests.engine.providers.llm.openai.fake_server import (
    Done,
    FakeOpenAIServer,
    Finish,
    Together,
    text_reply,
    tool_call,
)
from tests.factories import Tenant, make_tenant
from tests.sessions_app.wsclient import Client
from usage_app.models import UsageDaily, WorkspaceQuota

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(400)]

SESSIONS = 5
LOOKUP = {
    "name": "lookup",
    "description": "Look an order up.",
    "parameters": {"order": "string"},
    "handler": "(args) => ({found: args.order})",
}
CONFIG = {"type": "configure", "mode": "text", "instructions": "Be brief.", "tools": [LOOKUP]}


@pytest.fixture(autouse=True)
def embedded_sandbox(settings: Any) -> None:
    settings.TOOL_RUNNER = "sandbox"
    settings.CELERY_TASK_ALWAYS_EAGER = True  # this process is the sandbox's parent
    # Two races of SESSIONS run one after the other; the per-address limit is not under test
    # (a closed session's address slot may lapse a moment after its close).
    settings.SESSIONS_PER_ADDRESS = SESSIONS * 3


async def _tenant(email: str, **limits: int) -> Tenant:
    tenant = await sync_to_async(make_tenant)(email)
    if limits:
        await sync_to_async(WorkspaceQuota.objects.create)(workspace=tenant.workspace, **limits)
    return tenant


def _script_tool_turns(llm: FakeOpenAIServer, count: int) -> None:
    # The turns all start (their quota has room) before any is given its tool call: on a
    # loaded machine a turn handled a moment after another's call took the last one is
    # refused at its start (``quota_exceeded``, no ``chat``), rightly, and is not this race.
    together = asyncio.Barrier(count)
    for n in range(count):
        arguments = json.dumps({"order": f"A{n}"})
        call = tool_call(0, f"c{n}", "lookup", arguments)
        llm.script(Together(together), *call, Finish("tool_calls"), Done())
    for _ in range(count * 3):  # answers after each result (refused ones included)
        llm.script(text_reply("Done."))


async def _tool_turn(tenant: Tenant) -> Client:
    client = Client(f"/v1/session?key={tenant.publishable_key}")
    await client.__aenter__()
    await client.send(CONFIG)
    await client.until("ready", timeout=15)
    return client


def _ran(client: Client) -> int:
    return sum(
        1
        for event in client.events
        if event["type"] == "tool_status" and event.get("status") == "completed"
    )


async def _race(tenant: Tenant, llm: FakeOpenAIServer) -> list[Client]:
    _script_tool_turns(llm, SESSIONS)
    clients = await asyncio.gather(*(_tool_turn(tenant) for _ in range(SESSIONS)))
    await asyncio.gather(*(c.send({"type": "text", "text": "find it"}) for c in clients))
    # Generous: the sandbox's first calls start its workers, slow on a loaded machine.
    await asyncio.gather(*(_answered(c) for c in clients))
    return list(clients)


async def _answered(client: Client) -> None:
    try:
        await client.until("chat", timeout=90)
    except TimeoutError:  # say what it got instead
        raise AssertionError(f"no chat: {client.events}") from None


async def _close(clients: list[Client]) -> None:
    for client in clients:
        await client.__aexit__(None, None, None)


async def _check_race(llm: FakeOpenAIServer) -> None:
    capped = await _tenant("race@example.com", tool_calls_per_day=1)
    clients = await _race(capped, llm)
    try:
        # One call a day: the five sessions asking at the same instant ran one between
        # them (the bar is at most N-1 over; the reservation makes it none).
        assert sum(_ran(client) for client in clients) == 1
        refused = [c for c in clients if _ran(c) == 0]
        assert len(refused) == SESSIONS - 1
        for client in refused:
            failed = [e for e in client.events if e.get("status") == "failed"]
            assert failed, client.events
        # The next turn of any of them is refused before it reaches the model.
        asked = len(llm.requests)
        await clients[0].send({"type": "text", "text": "again"})
        error = await clients[0].until("error", timeout=10)
        assert error["code"] == "quota_exceeded"
        assert "quota of tool calls today" in error["message"]
        assert len(llm.requests) == asked
    finally:
        await _close(clients)
        llm.forget_scripts()

    # The normal path beside it: a workspace with room runs every call.
    roomy = await _tenant("roomy@example.com", tool_calls_per_day=100)
    clients = await _race(roomy, llm)
    try:
        assert [_ran(client) for client in clients] == [1] * SESSIONS
    finally:
        await _close(clients)
        llm.forget_scripts()

    def recorded() -> int:
        rows = UsageDaily.objects.filter(workspace=roomy.workspace)
        return sum(row.server_tool_calls for row in rows)

    for _ in range(100):  # the records follow after the turns, off their path
        if await sync_to_async(recorded)() == SESSIONS:
            break
        await asyncio.sleep(0.1)
    assert await sync_to_async(recorded)() == SESSIONS


async def test_five_sessions_at_once_take_one_allowed_tool_call_embedded(llm, settings) -> None:
    settings.REDIS_URL = ""  # counters, leases and rates in this process's memory
    await _check_race(llm)


@pytest.mark.redis
async def test_five_sessions_at_once_take_one_allowed_tool_call_over_redis(llm) -> None:
    await _check_race(llm)
