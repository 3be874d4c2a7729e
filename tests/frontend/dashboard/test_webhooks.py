"""The Webhooks pages: the signing secret shown once, the delivery log, redeliver."""

from __future__ import annotations

import logging
import re

import pytest
from django.test import Client

from tests.factories import Tenant
from tests.frontend.dashboard.conftest import page
from webhooks_app import services
from webhooks_app.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint

URL = "https://hooks.example.com/voice"


@pytest.fixture(autouse=True)
def scheduled(monkeypatch) -> list[tuple[int, int, float]]:
    """Attempts are only queued: these tests are about the pages (delivery has its own)."""
    calls: list[tuple[int, int, float]] = []
    monkeypatch.setattr("webhooks_app.dispatch.schedule", lambda *args: calls.append(args))
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
    assert "is not a public address" in _create(owner_client, owner, url="http://127.0.0.1/hook")
    assert "Port 8443 is not allowed" in _create(owner_client, owner, url="https://x.example:8443/")
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
