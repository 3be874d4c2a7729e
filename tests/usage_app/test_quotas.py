"""Quotas, over the real consumer: the session that crosses one is told and ends after its
turn, the next one is refused, another workspace is unaffected; 80 % tells the owner."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse

from core import leases as live
from sessions_app.models import Session
from tests.engine.providers.llm.openai.fake_server import (
    Delay,
    Done,
    Finish,
    Text,
    Usage,
    text_reply,
)
from tests.factories import Tenant, make_tenant
from tests.frontend.dashboard.conftest import logged_in
from tests.sessions_app.recording import eventually
from tests.sessions_app.wsclient import Client
from usage_app.models import QuotaAlert, WorkspaceQuota
from webhooks_app import services as webhooks
from webhooks_app.models import WebhookDelivery

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def scheduled(monkeypatch) -> list[tuple[int, int, float]]:
    """Deliveries are only queued here (their delivery has tests of its own)."""
    live._memory.clear()
    calls: list[tuple[int, int, float]] = []
    monkeypatch.setattr("webhooks_app.dispatch.schedule", lambda *args, **_: calls.append(args))
    return calls


def url(tenant: Tenant) -> str:
    return f"/v1/session?key={tenant.publishable_key}"


async def _tenant_with_quota(email: str, **limits: int) -> Tenant:
    tenant = await sync_to_async(make_tenant)(email)
    await sync_to_async(WorkspaceQuota.objects.create)(workspace=tenant.workspace, **limits)
    return tenant


async def _refusal(tenant: Tenant) -> tuple[int | None, dict[str, Any]]:
    async with Client(url(tenant)) as client:
        code = await client.closed()
        return code, client.events[0]


async def test_crossing_a_quota_ends_the_session_refuses_the_next_and_spares_others(llm):
    capped = await _tenant_with_quota("capped@example.com", llm_tokens_per_day=100)
    other = await sync_to_async(make_tenant)("other@example.com")
    llm.script(
        text_reply("Your order shipped.", usage=Usage(prompt_tokens=90, completion_tokens=20))
    )
    async with Client(url(capped)) as client:
        await client.send({"type": "configure", "mode": "text"})
        await client.until("ready")
        await client.send({"type": "text", "text": "Where is my order?"})
        chat = await client.until("chat")
        told = await client.until("error")
        assert await client.closed() == 4030
    assert chat["text"] == "Your order shipped."  # the turn that crossed it was finished
    assert told["code"] == "quota_exceeded"
    assert "LLM tokens today (UTC): 110 of 100 tokens" in told["message"]

    code, refused = await _refusal(capped)
    assert (code, refused["code"]) == (4030, "quota_exceeded")
    assert "quota of LLM tokens" in refused["message"]

    llm.script(text_reply("Hello from the other workspace."))
    async with Client(url(other)) as client:
        await client.send({"type": "configure", "mode": "text"})
        await client.until("ready")
        await client.send({"type": "text", "text": "hi"})
        assert (await client.until("chat"))["text"] == "Hello from the other workspace."

    ended = await sync_to_async(Session.objects.get)(workspace=capped.workspace)
    assert ended.close_code == 4030
    alert = await sync_to_async(QuotaAlert.objects.get)(workspace=capped.workspace)
    assert (alert.metric, alert.period, alert.level) == ("llm_tokens", "day", "exceeded")


async def test_a_running_session_finishes_its_turn_before_it_ends(llm):
    capped = await _tenant_with_quota("two@example.com", llm_tokens_per_day=100)
    llm.script(Text("A long "), Delay(0.6), Text("answer."), Finish(), Usage(5, 5), Done())
    llm.script(text_reply("Short.", usage=Usage(95, 10)))
    async with Client(url(capped)) as slow, Client(url(capped)) as fast:
        for client in (slow, fast):
            await client.send({"type": "configure", "mode": "text"})
            await client.until("ready")
        await slow.send({"type": "text", "text": "tell me everything"})
        await slow.until("chat_delta")
        await fast.send({"type": "text", "text": "quick"})
        assert (await fast.until("error"))["code"] == "quota_exceeded"
        assert await fast.closed() == 4030
        # The other session is mid-turn: its turn ends whole, then it is told and ends.
        assert (await slow.until("chat"))["text"] == "A long answer."
        assert (await slow.until("error"))["code"] == "quota_exceeded"
        assert await slow.closed() == 4030


async def test_eighty_percent_tells_the_owner_once(llm, scheduled):
    capped = await _tenant_with_quota("warn@example.com", tool_calls_per_month=10,
                                      llm_tokens_per_month=1000)  # fmt: skip
    await sync_to_async(webhooks.endpoint_create)(
        workspace=capped.workspace, url="https://hooks.example.com/voice", events=["quota.warning"]
    )
    llm.script(text_reply("Fine.", usage=Usage(700, 120)))
    llm.script(text_reply("Still fine.", usage=Usage(10, 1)))
    async with Client(url(capped)) as client:
        await client.send({"type": "configure", "mode": "text"})
        await client.until("ready")
        for text in ("one", "two"):
            await client.send({"type": "text", "text": text})
            await client.until("metrics")
        await client.send({"type": "ping", "t": 1})
        await client.until("pong")
        assert "error" not in client.types()  # a warning does not disturb the session

    def warned() -> list[WebhookDelivery]:
        return list(WebhookDelivery.objects.filter(workspace=capped.workspace))

    deliveries = await eventually(warned)
    assert [d.event_type for d in deliveries] == ["quota.warning"]  # once, not per turn
    assert '"percent":82' in deliveries[0].payload and "LLM tokens this month" in (
        deliveries[0].payload
    )
    assert [call[0] for call in scheduled] == [deliveries[0].pk]

    owner_page = await sync_to_async(_agents_page)(capped, owner=True)
    assert "Quota at 83 %: LLM tokens this month (UTC): 831 of 1000 tokens" in owner_page
    member_page = await sync_to_async(_agents_page)(capped, owner=False)
    assert "Quota at" not in member_page


def _agents_page(tenant: Tenant, *, owner: bool) -> str:
    from secrets_app import services

    user = tenant.user
    if not owner:
        user, _ = services.user_get_or_create(email="member-w@example.com", password="pw-x-123456")
        services.membership_add(workspace=tenant.workspace, user=user, role="member")
    client = logged_in(Tenant(user, tenant.workspace, "", ""))
    return client.get(reverse("dashboard:agents", args=[tenant.workspace.pk])).content.decode()


async def test_no_quota_means_no_limit(llm):
    tenant = await sync_to_async(make_tenant)("free@example.com")
    llm.script(text_reply("Big.", usage=Usage(10_000_000, 1)))
    async with Client(url(tenant)) as client:
        await client.send({"type": "configure", "mode": "text"})
        await client.until("ready")
        await client.send({"type": "text", "text": "go"})
        await client.until("metrics")
    async with Client(url(tenant)) as again:
        await again.send({"type": "configure", "mode": "text"})
        assert (await again.next())["type"] == "ready"


async def test_voice_minutes_count_during_a_long_silence(llm, monkeypatch, settings):
    """No turn at all: the audio is still recorded now and then, and the quota holds."""
    settings.AUDIO_MAX_SPEED = 100.0  # a minute of audio in a second (floods: test_limits)
    from realtime.resume import host
    from tests.engine.providers.fake import silence_pcm

    monkeypatch.setattr(host, "KEEP_EVERY_S", 0.05)
    monkeypatch.setattr(host, "USAGE_EVERY_S", 0.1)
    capped = await _tenant_with_quota("quiet@example.com", voice_minutes_per_day=1)
    async with Client(url(capped)) as client:
        await client.send({"type": "configure", "mode": "voice"})
        await client.until("ready")
        for _ in range(31):  # 62 s of silence, 2 s a frame, 80 times faster than real time
            await client.send_raw(data=silence_pcm(2000))
            await asyncio.sleep(0.025)
        told = await client.until("error", timeout=10)
        assert await client.closed() == 4030
    assert told["code"] == "quota_exceeded" and "voice minutes today" in told["message"]
    assert "turn" not in client.types()
