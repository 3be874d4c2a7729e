"""Zero retention: a spoken canary word reaches no table and no log line, while the session's
metadata and usage are kept; without it, the same search finds the word (the search works)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from engine.providers import registry
from postcall_app import retention
from sessions_app import services
from sessions_app.models import Session
from tests.engine.providers.fake import FakeSTT
from tests.engine.providers.llm.openai import fake_server as fake_openai
from tests.factories import Tenant, make_tenant, order_tool
from tests.sessions_app.recording import eventually
from tests.sessions_app.wsclient import Client
from webhooks_app import services as webhooks
from webhooks_app.models import EventType, WebhookDelivery

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("echo_tools")]

CANARY = "quokkazanzibar"
FRAME_MS = 20
LOUD = b"\xff\x7f\x01\x80" * (16 * FRAME_MS // 2)  # 20 ms of 16 kHz PCM16 the fake hears
QUIET = b"\x00\x00" * (16 * FRAME_MS)


class CanarySTT(FakeSTT):
    """Hears the canary in whatever is said."""

    def __init__(self, **options: object) -> None:
        super().__init__(texts=[f"where is my order {CANARY}"], silence_ms=200, **options)


@pytest.fixture
def tenant(transactional_db: None) -> Tenant:
    tenant = make_tenant("privacy@example.com")
    webhooks.endpoint_create(
        workspace=tenant.workspace, url="https://hooks.example.com/calls",
        events=list(EventType.values),
    )  # fmt: skip
    return tenant


def _script(llm: fake_openai.FakeOpenAIServer) -> None:
    arguments = json.dumps({"order_number": CANARY})
    llm.script(
        *fake_openai.tool_call(0, "call_1", "track_order", arguments),
        fake_openai.Finish("tool_calls"),
        fake_openai.Done(),
    )
    llm.script(fake_openai.text_reply(f"Order {CANARY} has shipped."))


async def _talk(tenant: Tenant, configure: dict[str, Any], *, spoken: bool = False) -> Session:
    """A typed (or spoken) turn, a server tool call and the reply, all carrying the canary
    (and the greeting, when the page sends its own)."""
    mode = "voice" if spoken else "text"
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": mode, **configure})
        ready = await client.until("ready")
        if spoken:
            for frame in [LOUD] * 15 + [QUIET] * 20:
                await client.send_raw(data=frame)
        else:
            await client.send({"type": "text", "text": f"Where is my order {CANARY}?"})
        await client.until("metrics")
    return await eventually(
        lambda: (
            Session.objects.filter(public_id=ready["sessionId"], ended_at__isnull=False)
            .filter(usage__llm_requests__gte=2)
            .first()
        )
    )


def _tables_holding(word: str) -> set[str]:
    """Every table of the database whose rows spell ``word`` anywhere."""
    found = set()
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            if any(word in repr(row).lower() for row in cursor.fetchall()):
                found.add(table)
    return found


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(f"{r.name} {r.getMessage()} {r.args!r}" for r in caplog.records).lower()


def _agent_with_zero_retention(tenant: Tenant) -> None:
    services.agent_create(
        workspace=tenant.workspace, name="Orders", slug="orders", zero_retention=True,
        greeting="Hello, order desk.", tools=[order_tool()],
    )  # fmt: skip


def _workspace_with_zero_retention(tenant: Tenant) -> None:
    retention.retention_policy_update(workspace=tenant.workspace, zero_retention=True)


@pytest.mark.parametrize(
    ("where", "spoken"), [("agent", False), ("workspace", False), ("workspace", True)]
)
async def test_a_canary_said_under_zero_retention_is_in_no_table_and_no_log(
    tenant: Tenant,
    llm: fake_openai.FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
    where: str,
    spoken: bool,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setitem(registry._ADDED["stt"], "canary", f"{__name__}.{CanarySTT.__name__}")
    settings.STT_PROVIDER = "canary"
    if where == "agent":
        await sync_to_async(_agent_with_zero_retention)(tenant)
        configure: dict[str, Any] = {"agent": "orders"}
    else:
        await sync_to_async(_workspace_with_zero_retention)(tenant)
        greeting = f"Hello, order desk {CANARY}."
        configure = {"instructions": "Be brief.", "greeting": greeting, "tools": [order_tool()]}
    _script(llm)
    session = await _talk(tenant, configure, spoken=spoken)

    assert CANARY in llm.requests[0].body.decode()  # it was said, and heard
    assert await sync_to_async(_tables_holding)(CANARY) == set()
    assert caplog.records and CANARY not in _logged(caplog)
    # What is kept: metadata, usage, which tool ran and how it ended; and the webhook, sent.
    assert session.zero_retention and (session.turn_count, session.tool_call_count) == (1, 1)
    assert session.usage["llm_requests"] == 2
    call = await sync_to_async(session.tool_calls.get)()
    assert (call.name, call.status, call.arguments, call.result) == (
        "track_order",
        "completed",
        {},
        "",
    )
    assert await sync_to_async(session.transcript.count)() == 0
    ended = await sync_to_async(WebhookDelivery.objects.get)(event_type="session.ended")
    assert json.loads(ended.payload)["data"]["session"]["transcript"] == []


async def test_without_zero_retention_the_same_search_finds_the_canary(
    tenant: Tenant, llm: fake_openai.FakeOpenAIServer
) -> None:
    _script(llm)
    greeting = f"Hello, order desk {CANARY}."
    session = await _talk(
        tenant, {"instructions": "Be brief.", "greeting": greeting, "tools": [order_tool()]}
    )
    assert not session.zero_retention
    assert await sync_to_async(_tables_holding)(CANARY) >= {
        "sessions_app_transcriptentry",
        "sessions_app_toolcallrecord",
        "webhooks_app_webhookdelivery",
    }
