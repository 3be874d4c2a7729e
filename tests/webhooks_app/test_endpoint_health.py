"""A receiver that keeps failing counts against its endpoint: it backs off, then is disabled
after WEBHOOK_DISABLE_AFTER_FAILURES failures in a row, its owner is mailed, the dashboard
says why; enabling it again starts afresh. The stored event is capped, and the workspace's
in-flight cap holds under a race."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from itertools import islice, pairwise

import pytest
from asgiref.sync import sync_to_async
from django.core import mail
from django.utils import timezone

from secrets_app.mail import wait_for_queued_mail
from secrets_app.models import AuditEvent
from sessions_app.models import Session, TranscriptEntry
from tests.factories import make_tenant
from tests.fakes.egress_server import EgressTestServer
from tests.frontend.dashboard.conftest import logged_in, page
from tests.sessions_app.recording import eventually
from tests.webhooks_app.receiver import WEBHOOK_DOCS, Receiver
from webhooks_app import in_flight, payloads, services
from webhooks_app.models import WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 3


@pytest.fixture
def embedded(settings):
    """The embedded default's delivery, quick retries, mail kept in memory."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.WEBHOOK_RETRY_BASE_S = 0.1
    settings.WEBHOOK_DISABLE_AFTER_FAILURES = LIMIT
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.MAIL_QUEUE = "thread"
    return settings


async def test_a_failing_endpoint_backs_off_then_is_disabled_and_its_owner_mailed(embedded):
    tenant = await sync_to_async(make_tenant)("failing@example.com", workspace_name="Acme")
    async with EgressTestServer() as server:
        embedded.EGRESS_PORTS = [server.port]
        receiver = Receiver(server, [500])
        receiver.install()
        _row, receiver.secret = await sync_to_async(services.endpoint_create)(
            workspace=tenant.workspace, url=receiver.url + "?token=hush", events=["quota.warning"]
        )
        emit = sync_to_async(services.event_emit)
        [first] = await emit(workspace_id=tenant.workspace.pk, event_type="quota.warning", data={})
        # A second event while the endpoint backs off waits for the backoff, not its own turn.
        backing_off = await eventually(
            lambda: WebhookEndpoint.objects.filter(consecutive_failures=1).first()
        )
        assert backing_off.backoff_until is not None
        [second] = await emit(workspace_id=tenant.workspace.pk, event_type="quota.warning", data={})
        endpoint = await eventually(
            lambda: WebhookEndpoint.objects.filter(
                workspace=tenant.workspace, enabled=False
            ).first()
        )
        await eventually(
            lambda: set(WebhookDelivery.objects.values_list("status", flat=True)) == {"failed"}
        )
        await asyncio.sleep(0.5)  # anything more would be sent by now
    assert len(receiver.answered) == LIMIT  # nothing after the endpoint was disabled
    times = await sync_to_async(
        lambda: sorted(a.at for d in WebhookDelivery.objects.all() for a in d.attempt_log.all())
    )()
    spacing = [(later - earlier).total_seconds() for earlier, later in pairwise(times)]
    assert spacing[0] >= 0.1 and spacing[1] >= 0.2  # the endpoint's backoff doubles
    assert endpoint.consecutive_failures == LIMIT and endpoint.disabled_at is not None
    assert endpoint.disabled_reason == (
        f"{LIMIT} delivery attempts in a row failed (the last: the endpoint answered HTTP 500)."
    )
    for delivery_id in (first.pk, second.pk):
        delivery = await sync_to_async(WebhookDelivery.objects.get)(pk=delivery_id)
        assert delivery.status == "failed"

    await asyncio.to_thread(wait_for_queued_mail)
    [message] = mail.outbox
    assert message.to == ["failing@example.com"]
    assert message.subject == f"Webhook endpoint disabled: {receiver.url}"  # no query: no token
    assert endpoint.disabled_reason in message.body and "Acme" in message.body
    assert "hush" not in message.subject + message.body
    audited = await sync_to_async(
        lambda: list(AuditEvent.objects.filter(action="webhook.disabled").values_list("workspace"))
    )()
    assert audited == [(tenant.workspace.pk,)]


def test_the_dashboard_says_why_and_enabling_starts_afresh(embedded, owner, member):
    endpoint, _secret = services.endpoint_create(
        workspace=owner.workspace, url="https://hooks.example.com/voice", events=["quota.warning"]
    )
    endpoint.consecutive_failures, endpoint.enabled = LIMIT, False
    endpoint.disabled_reason = "3 delivery attempts in a row failed (the last: timed out)."
    endpoint.backoff_until = endpoint.disabled_at = timezone.now()
    endpoint.save()
    for tenant in (owner, member):  # members see it too
        client = logged_in(tenant)
        for url in (page(owner, "webhooks"), page(owner, "webhook", endpoint.pk)):
            html = client.get(url).content.decode()
            assert "disabled by the platform" in html and endpoint.disabled_reason in html
    outsider = logged_in(make_tenant("outsider@example.com"))
    assert outsider.get(page(owner, "webhook", endpoint.pk)).status_code == 404

    response = logged_in(owner).post(
        page(owner, "webhook", endpoint.pk),
        {"events": ["quota.warning"], "enabled": "on", "description": ""},
    )
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.enabled and endpoint.consecutive_failures == 0
    assert (endpoint.disabled_reason, endpoint.backoff_until, endpoint.disabled_at) == (
        "",
        None,
        None,
    )
    html = logged_in(owner).get(page(owner, "webhooks")).content.decode()
    assert "disabled by the platform" not in html


def _long_session(workspace, messages: int, size: int) -> Session:
    session = Session.objects.create(workspace=workspace, ended_at=timezone.now(), close_code=1000)
    TranscriptEntry.objects.bulk_create(
        TranscriptEntry(session=session, role="user", text=f"{n:04d}" + "x" * size)
        for n in range(messages)
    )
    return session


def test_the_stored_event_is_capped_and_the_transcript_ends_with_the_marker(
    embedded, owner, monkeypatch
):
    monkeypatch.setattr("webhooks_app.dispatch.schedule", lambda *args, **kwargs: None)
    embedded.WEBHOOK_PAYLOAD_MAX_BYTES = 16 * 1024
    services.endpoint_create(
        workspace=owner.workspace, url="https://hooks.example.com/v", events=["session.ended"]
    )
    long = _long_session(owner.workspace, messages=200, size=500)  # ~100 KB of transcript
    [delivery] = services.session_ended_emit(session_id=long.pk, workspace_id=owner.workspace.pk)
    assert len(delivery.payload.encode()) <= 16 * 1024
    session = json.loads(delivery.payload)["data"]["session"]
    *kept, marker = session["transcript"]
    assert marker["text"] == payloads.TRUNCATED_MARKER  # the words docs/webhooks.md gives
    assert payloads.TRUNCATED_MARKER in WEBHOOK_DOCS.read_text()
    assert [entry["text"][:4] for entry in kept] == [f"{n:04d}" for n in range(len(kept))]
    assert len(kept) > 10 and session["transcript_omitted"] == 200 - len(kept)

    short = _long_session(owner.workspace, messages=3, size=10)
    [delivery] = services.session_ended_emit(session_id=short.pk, workspace_id=owner.workspace.pk)
    session = json.loads(delivery.payload)["data"]["session"]
    assert len(session["transcript"]) == 3 and session["transcript_omitted"] == 0


def test_the_in_flight_cap_holds_when_many_attempts_race_for_it(settings):
    """Twelve attempts of one workspace at once, three slots: three hold one, nine are
    parked at once (not queued again), and each slot given back hands out a parked one,
    until every slot is given back and none is left waiting."""
    settings.WEBHOOK_WORKSPACE_IN_FLIGHT = 3
    workspace_id = 990_000 + threading.get_ident() % 1000
    holders, release = threading.Barrier(3, timeout=30), threading.Event()

    def attempt(number: int) -> str | None:
        token = in_flight.take_or_park(workspace_id, in_flight.Parked(number, 1))
        if token is not None:
            holders.wait()  # all three hold a slot at once while the others try
            release.wait(30)
        return token

    with ThreadPoolExecutor(12) as pool:
        futures = [pool.submit(attempt, number) for number in range(12)]
        turned_away = [future.result() for future in islice(as_completed(futures, 30), 9)]
        assert in_flight.in_flight(workspace_id) == 3
        assert in_flight.parked(workspace_id) == 9
        release.set()
        tokens = [future.result(30) for future in futures]
    assert turned_away == [None] * 9 and len([t for t in tokens if t]) == 3
    handed_on = [in_flight.release(token) for token in tokens if token]
    assert [len(each) for each in handed_on] == [1, 1, 1]  # each slot given back passes on
    assert (in_flight.in_flight(workspace_id), in_flight.parked(workspace_id)) == (3, 6)
    # The parked ones run in the slots handed to them, and hand those on in turn.
    waiting = [each for handed in handed_on for each in handed]
    done: list[int] = []
    while waiting:
        parked, token = waiting.pop(0)
        assert in_flight.hold(token)
        assert in_flight.in_flight(workspace_id) <= 3
        done.append(parked.delivery_id)
        waiting += in_flight.release(token)
    assert len(done) == len(set(done)) == 9
    assert in_flight.in_flight(workspace_id) == 0 and in_flight.parked(workspace_id) == 0
