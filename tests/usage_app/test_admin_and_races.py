"""Quotas are set in the Django admin; usage and alerts stay right under concurrent writers."""

from __future__ import annotations

import uuid

import pytest

from secrets_app.models import ApiKey, User
from sessions_app import services as session_services
from sessions_app.models import Session
from tests.concurrency import at_once
from tests.factories import Tenant
from usage_app import quotas
from usage_app.models import QuotaAlert, UsageDaily, WorkspaceQuota
from usage_app.services import quota_check, usage_record
from webhooks_app import services as webhooks
from webhooks_app.models import WebhookDelivery


@pytest.fixture
def admin_client(client, db):
    staff = User.objects.create_superuser(email="staff@example.com", password="pw-staff-123")
    client.force_login(staff)
    return client


def test_platform_admins_set_a_workspaces_quotas(admin_client, owner: Tenant) -> None:
    response = admin_client.post(
        "/admin/usage_app/workspacequota/add/",
        {
            "workspace": owner.workspace.pk,
            "llm_tokens_per_day": "5000",
            "tool_calls_per_month": "9",
        },
    )
    assert response.status_code == 302
    states = quotas.quota_states(workspace_id=owner.workspace.pk)
    assert {(s.metric.name, s.period, s.limit) for s in states} == {
        ("llm_tokens", "day", 5000), ("tool_calls", "month", 9)
    }  # fmt: skip
    for model in ("workspacequota", "usagedaily", "quotaalert"):
        assert admin_client.get(f"/admin/usage_app/{model}/").status_code == 200


def test_the_admin_shows_no_webhook_secret_or_payload(admin_client, owner: Tenant) -> None:
    endpoint, secret = webhooks.endpoint_create(
        workspace=owner.workspace, url="https://hooks.example.com/", events=["quota.warning"]
    )
    webhooks.event_emit(
        workspace_id=owner.workspace.pk, event_type="quota.warning", data={"said": "PRIVATE-TEXT"}
    )
    delivery = WebhookDelivery.objects.get()
    pages = [
        admin_client.get(f"/admin/webhooks_app/webhookendpoint/{endpoint.pk}/change/"),
        admin_client.get(f"/admin/webhooks_app/webhookdelivery/{delivery.pk}/change/"),
        admin_client.get("/admin/webhooks_app/webhookdelivery/"),
    ]
    for response in pages:
        assert response.status_code == 200
        assert secret not in response.content.decode()
        assert "PRIVATE-TEXT" not in response.content.decode()


# ---------------------------------------------------------------- concurrent writers


def _sessions(tenant: Tenant, count: int) -> list[Session]:
    agent = session_services.agent_create(workspace=tenant.workspace, name="Desk", slug="desk")
    key = ApiKey.objects.filter(workspace=tenant.workspace).first()
    return [
        session_services.session_record_start(
            session_id=uuid.uuid4().hex,
            workspace=tenant.workspace,
            api_key=key,
            origin="",
            mode="text",
            agent=agent,
        )
        for _ in range(count)
    ]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_sessions_ending_at_once_add_up_in_one_day_row(owner: Tenant) -> None:
    sessions = _sessions(owner, 8)
    at_once(
        lambda i: usage_record(
            session=sessions[i], usage={"prompt_tokens": 100 + i, "llm_requests": 1}, ended=True
        ),
        8,
    )
    [day] = UsageDaily.objects.filter(workspace=owner.workspace)
    assert (day.sessions, day.llm_requests, day.prompt_tokens) == (8, 8, 800 + 28)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_quota_crossed_by_many_at_once_alerts_once(owner: Tenant, monkeypatch) -> None:
    monkeypatch.setattr("webhooks_app.dispatch.schedule", lambda *args, **_: None)
    WorkspaceQuota.objects.create(workspace=owner.workspace, llm_tokens_per_day=100)
    webhooks.endpoint_create(
        workspace=owner.workspace, url="https://hooks.example.com/", events=["quota.exceeded"]
    )
    for session in _sessions(owner, 1):
        usage_record(session=session, usage={"completion_tokens": 150})
    told: list[str | None] = []
    at_once(lambda i: told.append(quota_check(workspace_id=owner.workspace.pk)), 6)
    assert len(told) == 6 and all(words and "LLM tokens" in words for words in told)
    assert QuotaAlert.objects.filter(workspace=owner.workspace).count() == 1
    assert WebhookDelivery.objects.filter(event_type="quota.exceeded").count() == 1
