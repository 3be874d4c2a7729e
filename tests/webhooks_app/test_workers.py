"""Webhooks cannot hurt tools or other workspaces (issue 21): real Redis, the real sandbox
worker and the real webhook worker, each started as the docs say.

One workspace with 20 endpoints that never answer keeps at most its cap of deliveries in
flight; meanwhile another workspace's server tool call (the sandbox worker: another queue)
and its own ``session.ended`` webhook (a free webhook task process) go through. And a worker
killed in the middle of a delivery does not keep the workspace's slot for ever."""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import dataclass, field
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from sessions_app.models import Session
from tests.factories import make_tenant
from tests.fakes.egress_server import EgressTestServer, RecordedRequest, respond
from tests.sessions_app.recording import eventually
from tests.tools_app.jailed import session_runner
from tests.webhooks_app.receiver import Receiver
from tests.webhooks_app.workers import SANDBOX_QUEUES, start_webhook_worker, start_worker
from webhooks_app import dispatch, in_flight, services
from webhooks_app.models import WebhookAttempt, WebhookDelivery

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),  # two workers start on a busy machine; the waits below are bounded
]

HANGING = "/never-answers"
REDIRECTS = "/redirects"
CAP = 2


@dataclass
class Hanging:
    """Endpoints that take the request and never answer (until the test ends)."""

    open: int = 0
    most_open: int = 0
    seen: list[str] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, request: RecordedRequest, writer: Any, server: object) -> None:
        self.seen.append(request.target)
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            await self.release.wait()
        finally:
            self.open -= 1


_redirects = respond(302, b"", [("Location", "https://example.com/elsewhere")])


def _invocation(workspace_id: int) -> Any:
    from engine.tools.call import ToolRequest

    return ToolRequest(
        call_id=f"call-{workspace_id}", session_id="calm", workspace_id=workspace_id,
        name="add", handler="(args) => args.a + args.b", arguments={"a": 2, "b": 3},
        timeout_s=30, pinned=False,
    )  # fmt: skip


def _ended_session(workspace: Any) -> Session:
    return Session.objects.create(workspace=workspace, ended_at=timezone.now(), close_code=1000)


def _attempts_of(workspace: Any) -> int:
    return WebhookAttempt.objects.filter(delivery__workspace=workspace).count()


FLOOD_SESSIONS = 12  # × 20 endpoints: 240 deliveries queued before the calm workspace's event


async def _flood(server: EgressTestServer, hanging: Hanging, cap: int = CAP) -> Any:
    """A workspace with 19 endpoints that never answer and one that answers 302, and
    ``FLOOD_SESSIONS`` ended sessions (an event for each endpoint), three at a time."""
    flooder = await sync_to_async(make_tenant)("flood@example.com")
    for n in range(services.ENDPOINTS_MAX):
        path = REDIRECTS if n == 0 else f"{HANGING}?n={n}"
        await sync_to_async(services.endpoint_create)(
            workspace=flooder.workspace, url=server.url(path), events=["session.ended"]
        )  # fmt: skip

    async def end_one() -> None:
        session = await sync_to_async(_ended_session)(flooder.workspace)
        await sync_to_async(services.session_ended_emit)(
            session_id=session.pk, workspace_id=flooder.workspace.pk
        )

    for _ in range(FLOOD_SESSIONS // 3):
        await asyncio.gather(*(end_one() for _ in range(3)))
    await eventually(lambda: hanging.open == cap, within=60)
    return flooder


async def _calm_delivery_s(calm: Any, *, also: Any = None) -> tuple[float, Any]:
    """Seconds from the calm workspace's event to its delivery (the records' own clock)."""
    session = await sync_to_async(_ended_session)(calm.workspace)
    emitted, extra = await asyncio.gather(
        sync_to_async(services.session_ended_emit)(
            session_id=session.pk, workspace_id=calm.workspace.pk
        ),
        also if also is not None else asyncio.sleep(0),
    )
    delivered = await eventually(
        lambda: WebhookDelivery.objects.filter(pk=emitted[0].pk, status="succeeded").first(),
        within=90,
    )
    return (delivered.delivered_at - delivered.created_at).total_seconds(), (delivered, extra)


async def test_a_flood_of_hanging_endpoints_delays_neither_another_tool_call_nor_webhook(
    tmp_path, settings
):
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    settings.TOOL_RUNNER = "sandbox"
    settings.WEBHOOK_WORKSPACE_IN_FLIGHT = CAP  # events take their slot when queued
    calm = await sync_to_async(make_tenant)("calm@example.com")
    hanging = Hanging()
    async with EgressTestServer() as server:
        settings.EGRESS_PORTS = [server.port]
        server.route(HANGING, hanging)
        server.route(REDIRECTS, _redirects)
        receiver = Receiver(server, [200, 200])
        receiver.install()
        _row, receiver.secret = await sync_to_async(services.endpoint_create)(
            workspace=calm.workspace, url=receiver.url, events=["session.ended"]
        )
        sandbox = await asyncio.to_thread(
            start_worker, tmp_path / "sandbox.log", queues=SANDBOX_QUEUES, concurrency=1,
            ready_marker="sandbox worker protections",
        )  # fmt: skip
        webhooks = await asyncio.to_thread(
            start_webhook_worker, tmp_path / "webhooks.log", port=server.port,
            concurrency=CAP + 2, WEBHOOK_WORKSPACE_IN_FLIGHT=str(CAP),
            WEBHOOK_TIMEOUT_S="120",
        )  # fmt: skip
        try:
            baseline_s, _ = await _calm_delivery_s(calm)
            flooder = await _flood(server, hanging)
            async with session_runner() as runner:
                flooded_s, (delivered, tool_call) = await _calm_delivery_s(
                    calm, also=runner.run(_invocation(calm.workspace.pk))
                )
            print(f"calm workspace's webhook: {baseline_s:.2f} s alone, "
                  f"{flooded_s:.2f} s behind the flood")  # fmt: skip
            # Both went through while every one of the flood's attempts was still hanging,
            # and the flood's hundreds of waiting deliveries did not hold the calm one up.
            assert flooded_s < baseline_s + 2.0, (baseline_s, flooded_s)
            assert hanging.open == CAP
            await asyncio.sleep(2.0)  # the flood's deliveries wait (parked, not in the queue)…
            assert hanging.most_open == CAP  # …and never more than its cap is in flight
            assert await asyncio.to_thread(in_flight.parked, flooder.workspace.pk) > 200
            waiting = await sync_to_async(
                lambda: list(
                    WebhookDelivery.objects.filter(workspace=flooder.workspace).values_list(
                        "status", flat=True
                    )
                )
            )()
            # none lost, none given up (the 302 endpoint's wait for their retry)
            assert len(waiting) == FLOOD_SESSIONS * services.ENDPOINTS_MAX
            assert set(waiting) <= {"pending", "retrying"}
        finally:
            hanging.release.set()
            await asyncio.to_thread(webhooks.stop)
            await asyncio.to_thread(sandbox.stop)
    assert (tool_call.status, tool_call.result) == ("completed", "5")
    assert delivered.attempts == 1 and receiver.verified == [True, True]
    assert len(set(hanging.seen)) == len(hanging.seen)  # each hanging attempt sent once


async def test_a_worker_killed_mid_delivery_does_not_keep_the_workspace_slot(tmp_path, settings):
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    settings.WEBHOOK_WORKSPACE_IN_FLIGHT = 1
    settings.WEBHOOK_TIMEOUT_S = 10.0  # a lapsed slot frees itself in 2 × 10 + 10 s
    tenant = await sync_to_async(make_tenant)("crash@example.com")
    hanging = Hanging()
    env = {"WEBHOOK_WORKSPACE_IN_FLIGHT": "1", "WEBHOOK_TIMEOUT_S": "10"}
    async with EgressTestServer() as server:
        settings.EGRESS_PORTS = [server.port]
        server.route(HANGING, hanging)
        receiver = Receiver(server, [200])
        receiver.install()
        await sync_to_async(services.endpoint_create)(
            workspace=tenant.workspace, url=server.url(HANGING), events=["quota.exceeded"]
        )
        _row, receiver.secret = await sync_to_async(services.endpoint_create)(
            workspace=tenant.workspace, url=receiver.url, events=["quota.warning"]
        )
        first = await asyncio.to_thread(
            start_webhook_worker, tmp_path / "first.log", port=server.port, **env
        )
        try:
            await sync_to_async(services.event_emit)(
                workspace_id=tenant.workspace.pk, event_type="quota.exceeded", data={}
            )
            await eventually(lambda: hanging.open == 1, within=60)
            os.killpg(first.pid, signal.SIGKILL)  # the worker and its task process, at once
        finally:
            await asyncio.to_thread(first.stop)
        assert await asyncio.to_thread(in_flight.in_flight, tenant.workspace.pk) == 1
        second = await asyncio.to_thread(
            start_webhook_worker, tmp_path / "second.log", port=server.port, **env
        )
        try:
            await sync_to_async(services.event_emit)(
                workspace_id=tenant.workspace.pk, event_type="quota.warning", data={}
            )
            delivered = await eventually(
                lambda: WebhookDelivery.objects.filter(
                    event_type="quota.warning", status="succeeded"
                ).first(),
                within=90,
            )
        finally:
            hanging.release.set()
            await asyncio.to_thread(second.stop)
    assert delivered.attempts == 1 and receiver.verified == [True]
    assert await asyncio.to_thread(in_flight.in_flight, tenant.workspace.pk) == 0


async def test_embedded_a_flood_of_hanging_endpoints_does_not_delay_another_webhook(
    settings, monkeypatch
):
    """The same flood on the embedded default (threads of this process, slots counted here):
    the flood's deliveries over its cap are parked, so the calm one goes straight through."""
    settings.REDIS_URL, settings.CELERY_TASK_ALWAYS_EAGER = None, True
    settings.DEV_ALLOW_PRIVATE_EGRESS, settings.WEBHOOK_TIMEOUT_S = True, 120.0
    cap = settings.WEBHOOK_WORKSPACE_IN_FLIGHT
    # A timetable of this test's own, with the threads the docs ask for (the cap plus two).
    monkeypatch.setattr(dispatch, "_dispatcher", dispatch.EmbeddedDispatcher(cap + 2))
    calm = await sync_to_async(make_tenant)("calm@example.com")
    hanging = Hanging()
    async with EgressTestServer() as server:
        settings.EGRESS_PORTS = [server.port]
        server.route(HANGING, hanging)
        server.route(REDIRECTS, _redirects)
        receiver = Receiver(server, [200])
        receiver.install()
        _row, receiver.secret = await sync_to_async(services.endpoint_create)(
            workspace=calm.workspace, url=receiver.url, events=["session.ended"]
        )
        flooder = None
        try:
            baseline_s, _ = await _calm_delivery_s(calm)
            flooder = await _flood(server, hanging, cap)
            flooded_s, _ = await _calm_delivery_s(calm)
            print(f"embedded, calm workspace's webhook: {baseline_s:.2f} s alone, "
                  f"{flooded_s:.2f} s behind the flood")  # fmt: skip
            assert flooded_s < baseline_s + 2.0, (baseline_s, flooded_s)
            assert hanging.open == hanging.most_open == cap
            assert in_flight.parked(flooder.workspace.pk) > 200
        finally:
            if flooder is not None:  # what is left of the flood finds nothing to send
                await sync_to_async(lambda: flooder.workspace.webhook_endpoints.all().delete())()
            hanging.release.set()
    assert receiver.verified == [True, True]
