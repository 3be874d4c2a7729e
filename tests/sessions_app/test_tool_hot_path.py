"""What a settled server tool call leaves for later: its console log and its record are
written off the path, and the web process decrypts no secret for them."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from secrets_app import services as secret_services
from sessions_app import services
from sessions_app.models import Session, ToolCallRecord
from tests.engine.providers.llm.openai.fake_server import (
    Done,
    FakeOpenAIServer,
    Finish,
    text_reply,
    tool_call,
)
from tests.factories import Tenant, make_tenant
from tests.sessions_app.wsclient import Client
from tools_app import services as tool_services

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_leases")]

SECRET_VALUE = "sk_live_9fQ2mZxR7tLwPa3c"
TEXT_CONFIG = {"type": "configure", "mode": "text", "instructions": "Be brief."}
NOISY = {
    "name": "noisy",
    "parameters": {"order": "string"},
    "handler": "(args) => { console.log('looked up ' + args.order); return args }",  # echoes
}
SLOW_WRITE_S = 0.3


@pytest.fixture
def tenant(transactional_db: None, settings: Any) -> Tenant:
    settings.TOOL_RUNNER = "sandbox"
    settings.CELERY_TASK_ALWAYS_EAGER = True  # this process is the sandbox's parent
    tenant = make_tenant("hot-path@example.com")
    secret_services.secret_set(
        workspace=tenant.workspace, name="SHOP_KEY", value=SECRET_VALUE,
        allowed_hosts=["shop.example.com"],
    )  # fmt: skip
    return tenant


async def _tool_turn(tenant: Tenant, llm: FakeOpenAIServer, order: str) -> tuple[str, float]:
    """One typed turn calling ``noisy`` in two rounds: the session id, and the seconds from
    the LLM's request that called it again to its next request (with the second result).
    The first call's console log is being stored meanwhile."""
    for round_no in (1, 2):
        arguments = json.dumps({"order": f"{order}.{round_no}"})
        llm.script(*tool_call(0, f"c{round_no}", "noisy", arguments), Finish("tool_calls"), Done())
    llm.script(text_reply("Found it."))
    first = len(llm.requests)
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({**TEXT_CONFIG, "tools": [NOISY]})
        ready = await client.until("ready")
        await client.send({"type": "text", "text": "where is my order"})
        await client.until("chat", timeout=15)
    calling, answered = llm.requests[first + 1], llm.requests[first + 2]
    return ready["sessionId"], answered.received_at - calling.received_at


def _console_entries(session_id: str) -> list[str]:
    session = Session.objects.get(public_id=session_id)
    return [entry.text for entry in session.transcript.filter(role="tool")]


async def test_a_slow_console_log_write_does_not_delay_the_tool_result(
    tenant: Tenant, llm: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _tool_turn(tenant, llm, "A0")  # warm: the sandbox worker, the LLM connection
    _, usual_s = await _tool_turn(tenant, llm, "A1")

    store = services.session_record_tool_log

    def slow_store(**kwargs: Any) -> None:
        time.sleep(SLOW_WRITE_S)
        store(**kwargs)

    monkeypatch.setattr(services, "session_record_tool_log", slow_store)
    session_id, slowed_s = await _tool_turn(tenant, llm, "A2")

    assert slowed_s - usual_s < 0.15, (usual_s, slowed_s)
    for _ in range(50):  # stored afterwards
        if await sync_to_async(_console_entries)(session_id):
            break
        await asyncio.sleep(0.1)
    assert await sync_to_async(_console_entries)(session_id) == [
        "noisy console:\nlooked up A2.1",
        "noisy console:\nlooked up A2.2",
    ]


@pytest.fixture
def decrypted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the secrets decrypted in this process, in order."""
    names: list[str] = []
    resolve = tool_services.secret_resolve

    def counted(*, secret: Any) -> str:
        names.append(secret.name)
        return resolve(secret=secret)

    monkeypatch.setattr(tool_services, "secret_resolve", counted)
    return names


def _records(session_id: str) -> list[ToolCallRecord]:
    return list(ToolCallRecord.objects.filter(session__public_id=session_id).order_by("id"))


async def test_a_settled_call_decrypts_no_secret_for_its_record_yet_masks_an_echoed_one(
    tenant: Tenant, llm: FakeOpenAIServer, decrypted: list[str]
) -> None:
    session_id, _ = await _tool_turn(tenant, llm, f"B {SECRET_VALUE}")

    # Once per call, by the sandbox's parent (this process on the embedded platform;
    # a Celery task process in production); none for the records of the two calls.
    assert decrypted == ["SHOP_KEY", "SHOP_KEY"]
    records = await sync_to_async(_records)(session_id)
    assert [r.status for r in records] == ["completed", "completed"]
    for round_no, record in enumerate(records, start=1):
        masked = f"B [secret SHOP_KEY].{round_no}"
        assert record.arguments == {"order": masked}
        assert json.loads(record.result) == {"order": masked}
    logs = await sync_to_async(_console_entries)(session_id)
    assert logs == [f"noisy console:\nlooked up B [secret SHOP_KEY].{n}" for n in (1, 2)]
    assert not any(SECRET_VALUE in json.dumps(r.arguments) + r.result for r in records)


async def test_client_tool_results_are_masked_with_secrets_decrypted_once_per_session(
    tenant: Tenant, llm: FakeOpenAIServer, decrypted: list[str]
) -> None:
    for call_id in ("k1", "k2"):
        llm.script(*tool_call(0, call_id, "clipboard", "{}"), Finish("tool_calls"), Done())
    llm.script(text_reply("Pasted."))
    tool = {"name": "clipboard", "client": True}
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({**TEXT_CONFIG, "tools": [tool]})
        ready = await client.until("ready")
        await client.send({"type": "text", "text": "paste it twice"})
        for _ in range(2):
            call = await client.until("tool_call")
            await client.send(
                {"type": "tool_result", "callId": call["callId"], "result": SECRET_VALUE}
            )
        await client.until("chat", timeout=15)
    records = await sync_to_async(_records)(ready["sessionId"])
    assert [json.loads(r.result) for r in records] == ["[secret SHOP_KEY]"] * 2
    assert decrypted == ["SHOP_KEY"]
