"""The Webhooks pages: the signing secret shown once, the delivery log, redeliver."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from django.test import Client

from secrets_app.models import AuditEvent
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import page
from webhooks_app import services
from webhooks_app.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint

URL = "https://hooks.example.com/voice"


@pytest.fixture(autouse=True)
def scheduled(monkeypatch) -> list[tuple[int, int, float]]:
    """Attempts are only queued: these tests are about the pages (delivery has its own)."""
    calls: list[tuple[int, int, float]] = []
    monkeypatch.setattr("webhooks_app.dispatch.schedule", lambda *args, **_: calls.append(args))
    return calls


def _create(client: Client, tenant: Tenant, **fields: object) -> str:
    data = {"url": URL, "events": ["session.ended", "quota.warning"], **fields}
    return client.post(page(tenant, "webhook-new"), data).content.decode()


def test_the_signing_secret_is_shown_once(
    owner: Tenant, owner_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    response = owner_client.post(
        page(owner, "webhook-new"), {"url": URL, "events": ["session.ended"]}
    )
    assert response["Cache-Control"] == "no-store"
    secret = re.search(r"whsec_[A-Za-z0-9]{32}", response.content.decode())
    assert secret is not None
    endpoint = WebhookEndpoint.objects.get(workspace=owner.workspace)
    for url in (page(owner, "webhooks"), page(owner, "webhook", endpoint.pk)):
        html = owner_client.get(url).content.decode()
        assert URL in html and secret[0] not in html
    assert secret[0] not in caplog.text


def test_bad_endpoints_are_refused_in_words(owner: Tenant, owner_client: Client) -> None:
    assert "must start with https:// or http://" in _create(
        owner_client, owner, url="ftp://x.example"
    )
    private = _create(owner_client, owner, url="http://127.0.0.1/hook")
    port = _create(owner_client, owner, url="https://x.example:8443/")
    assert "127.0.0.1:80 is not a public address the platform can reach." in private
    assert "x.example:8443 is not a public address the platform can reach." in port
    for html in (private, port):  # the same words, naming the settings that allow more
        assert "ports 80, 443 are reached (EGRESS_PORTS)" in html
        assert "DEV_ALLOW_PRIVATE_EGRESS=true allows any address and port" in html
    assert "Select a valid choice" in _create(owner_client, owner, events=["session.started"])
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.django_db(transaction=True)  # attempts are scheduled once the data is committed
def test_the_log_and_redeliver(owner: Tenant, owner_client: Client, scheduled) -> None:
    endpoint, _secret = services.endpoint_create(
        workspace=owner.workspace, url=URL, events=["quota.warning"]
    )
    [delivery] = services.event_emit(
        workspace_id=owner.workspace.pk, event_type="quota.warning", data={"quota": {}}
    )
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        status="failed", attempts=1, last_status_code=500, last_latency_ms=12.0
    )
    WebhookAttempt.objects.create(delivery=delivery, number=1, status_code=500, latency_ms=12.0)
    html = owner_client.get(page(owner, "webhook", endpoint.pk)).content.decode()
    assert "quota.warning" in html and "Failed" in html and "HTTP 500, 12 ms" in html
    redeliver = page(owner, "webhook-redeliver", endpoint.pk, delivery.pk)
    html = owner_client.post(redeliver, follow=True).content.decode()
    assert "is being sent again" in html
    assert scheduled[-1] == (delivery.pk, 2, 0.0)  # the next attempt, at once
    html = owner_client.post(redeliver, follow=True).content.decode()
    assert "still being retried" in html and len(scheduled) == 2


def test_settings_and_delete(owner: Tenant, owner_client: Client) -> None:
    endpoint, _ = services.endpoint_create(
        workspace=owner.workspace, url=URL, events=["session.ended"]
    )
    owner_client.post(
        page(owner, "webhook", endpoint.pk),
        {"url": "https://elsewhere.example.com/", "events": ["tool_call.failed"], "enabled": ""},
    )
    endpoint.refresh_from_db()
    assert (endpoint.url, endpoint.events, endpoint.enabled) == (URL, ["tool_call.failed"], False)
    assert (
        services.event_emit(workspace_id=owner.workspace.pk, event_type="tool_call.failed", data={})
        == []
    )  # disabled
    owner_client.post(page(owner, "webhook-delete", endpoint.pk))
    assert not WebhookEndpoint.objects.exists()


def test_members_see_but_do_not_change(owner: Tenant, member_client: Client) -> None:
    endpoint, _ = services.endpoint_create(
        workspace=owner.workspace, url=URL, events=["session.ended"]
    )
    assert member_client.get(page(owner, "webhook", endpoint.pk)).status_code == 200
    assert member_client.get(page(owner, "webhook-new")).status_code == 403
    assert member_client.post(page(owner, "webhook-delete", endpoint.pk)).status_code == 403


def test_the_outsider_sees_nothing(owner: Tenant, outsider_client: Client) -> None:
    endpoint, _ = services.endpoint_create(
        workspace=owner.workspace, url=URL, events=["quota.warning"]
    )
    [delivery] = services.event_emit(
        workspace_id=owner.workspace.pk, event_type="quota.warning", data={}
    )
    for url in (page(owner, "webhooks"), page(owner, "webhook", endpoint.pk),
                page(owner, "webhook-delete", endpoint.pk)):  # fmt: skip
        assert outsider_client.get(url).status_code == 404
    redeliver = page(owner, "webhook-redeliver", endpoint.pk, delivery.pk)
    assert outsider_client.post(redeliver).status_code == 404
    assert WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_every_endpoint_change_and_redelivery_is_audited(owner: Tenant, scheduled) -> None:
    """A rogue admin routing transcripts to themselves is seen: who, what, from where; the
    URL without its query (where a receiver's token may ride), never the signing secret."""
    client = Client(REMOTE_ADDR="203.0.113.7")
    client.force_login(owner.user)
    created = _create(client, owner, url=URL + "?token=RECEIVER-TOKEN")
    secret = re.search(r"whsec_[A-Za-z0-9]{32}", created)
    assert secret is not None
    endpoint = WebhookEndpoint.objects.get(workspace=owner.workspace)
    client.post(
        page(owner, "webhook", endpoint.pk), {"events": ["tool_call.failed"], "enabled": ""}
    )
    services.endpoint_update(endpoint=endpoint, events=["session.ended"], enabled=True)
    [delivery] = services.event_emit(
        workspace_id=owner.workspace.pk, event_type="session.ended", data={}
    )
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status="failed", attempts=1)
    client.post(page(owner, "webhook-redeliver", endpoint.pk, delivery.pk))
    client.post(page(owner, "webhook-delete", endpoint.pk))
    events = list(
        AuditEvent.objects.filter(
            workspace=owner.workspace, action__startswith="webhook."
        ).order_by("pk")
    )
    assert [(e.action, e.actor_label) for e in events] == [
        ("webhook.created", "owner@example.com"),
        ("webhook.updated", "owner@example.com"),
        ("webhook.updated", "system"),
        ("webhook.redelivered", "owner@example.com"),
        ("webhook.deleted", "owner@example.com"),
    ]
    assert {e.target for e in events} == {URL}
    assert events[0].details == {"events": ["session.ended", "quota.warning"], "enabled": True}
    assert events[1].details == {"events": ["tool_call.failed"], "enabled": False}
    assert events[3].details["event_id"] == str(delivery.event_id)
    assert all(e.address == "203.0.113.7" for e in events if e.actor_user is not None)
    logged = str([(e.target, e.details) for e in events])
    assert "RECEIVER-TOKEN" not in logged and secret[0] not in logged


def test_the_help_says_the_rule_in_force(owner: Tenant, owner_client: Client, settings) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = False
    strict = owner_client.get(page(owner, "webhook-new")).content.decode()
    assert "Public addresses on ports 80, 443 only (EGRESS_PORTS)" in strict
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    dev = owner_client.get(page(owner, "webhook-new")).content.decode()
    assert "DEV_ALLOW_PRIVATE_EGRESS=true (development): any address and port" in dev
    assert "Public addresses on ports" not in dev


def test_the_page_points_at_the_signature_check_that_exists(
    owner: Tenant, owner_client: Client
) -> None:
    """The lede names a file and a section the docs really have (the README no longer does)."""
    html = owner_client.get(page(owner, "webhooks")).content.decode()
    assert "README" not in html
    assert "docs/webhooks.md" in html and "“Checking the signature”" in html
    docs = (Path(__file__).resolve().parents[3] / "docs" / "webhooks.md").read_text()
    assert "\n## Checking the signature\n" in docs
