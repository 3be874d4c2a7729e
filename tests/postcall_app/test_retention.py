"""Retention: redaction of stored transcripts, the purge job (audited, per workspace, only
what is older than each period), and the REST API for the policy (the outsider's is its own)."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from platform_site.celery import app as celery_app
from postcall_app import retention
from postcall_app.tasks import RETENTION_TASK, SWEEP_TASK
from secrets_app import services as secret_services
from secrets_app.models import ApiKey, AuditEvent
from sessions_app import privacy, services
from sessions_app.models import Session, SessionAnalysis, SessionError, TranscriptEntry
from tests.conftest import api_client
from tests.factories import Tenant
from webhooks_app import services as webhooks
from webhooks_app.models import WebhookDelivery

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("said", "stored"),
    [
        ("call me on +1 (415) 555-0199 today", "call me on [phone number] today"),
        ("my card is 4111 1111 1111 1111.", "my card is [card number]."),
        ("write to ada.l@example.co.uk please", "write to [email] please"),
        ("order 1042 for 3 people", "order 1042 for 3 people"),
    ],
)
def test_redaction_masks_numbers_cards_and_addresses_only(said: str, stored: str) -> None:
    assert privacy.redact(said) == stored


def _session(tenant: Tenant, *, ended_days_ago: float = 0) -> Session:
    key = ApiKey.objects.filter(workspace=tenant.workspace, kind="publishable").first()
    assert key is not None
    session = services.session_record_start(
        session_id=uuid.uuid4().hex, workspace=tenant.workspace, api_key=key, origin="",
        mode="text", agent=None,
    )  # fmt: skip
    services.session_record_append(session=session, entries=[("user", "call +44 20 7946 0958")])
    services.session_record_tool_log(
        workspace_id=tenant.workspace.pk, session_id=session.public_id.hex, tool_name="lookup",
        console="looked up",
    )  # fmt: skip
    services.session_record_tool_call(
        session=session, call_id="c1", name="lookup", arguments={"q": "x"}, status="completed",
        result="ok", error=None, duration_ms=3.0, bindings=[],
    )  # fmt: skip
    services.session_record_error(session=session, code="llm_failed", detail="boom", bindings=[])
    ended = timezone.now() - timedelta(days=ended_days_ago)
    Session.objects.filter(pk=session.pk).update(ended_at=ended)
    SessionAnalysis.objects.create(
        workspace=tenant.workspace, session=session, status="completed", summary="s",
        completed_at=ended,
    )  # fmt: skip
    session.refresh_from_db()
    return session


def test_a_workspace_that_redacts_keeps_transcripts_masked(owner: Tenant) -> None:
    retention.retention_policy_update(workspace=owner.workspace, redact_transcripts=True)
    session = _session(owner)
    assert session.redacted
    assert [e.text for e in session.transcript.filter(role="user")] == ["call [phone number]"]


def test_the_purge_deletes_only_what_is_older_than_each_period_and_audits_it(
    owner: Tenant, outsider: Tenant
) -> None:
    retention.retention_policy_update(
        workspace=owner.workspace, transcripts_days=30, tool_logs_days=7, analysis_days=90
    )
    old, recent = _session(owner, ended_days_ago=40), _session(owner, ended_days_ago=10)
    untouched = _session(outsider, ended_days_ago=400)  # keeps everything: no policy
    endpoint, _ = webhooks.endpoint_create(
        workspace=owner.workspace, url="https://hooks.example.com/x", events=["session.ended"]
    )
    for session in (old, recent):
        (delivery,) = webhooks.session_ended_emit(
            session_id=session.pk, workspace_id=owner.workspace.pk
        )
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status="succeeded", created_at=session.ended_at
        )

    call_command("retention_purge")

    assert not old.transcript.exists() and not old.tool_calls.exists()
    assert SessionError.objects.get(session=old).detail == ""
    assert SessionAnalysis.objects.filter(session=old).exists()  # 40 days < 90
    assert recent.transcript.filter(role="user").exists()  # 10 days < 30
    assert not recent.tool_calls.exists() and not recent.transcript.filter(role="tool").exists()
    assert WebhookDelivery.objects.filter(endpoint=endpoint).count() == 1
    assert untouched.transcript.count() == 2 and untouched.tool_calls.count() == 1
    assert Session.objects.filter(pk=old.pk, ended_at__isnull=False).exists()  # metadata kept
    (audit,) = AuditEvent.objects.filter(workspace=owner.workspace, action="retention.purged")
    assert audit.details == {
        "transcript_entries": 1, "error_details": 1, "webhook_events": 1, "tool_calls": 2,
        "tool_consoles": 2,
    }  # fmt: skip
    assert not AuditEvent.objects.filter(workspace=outsider.workspace, action="retention.purged")
    call_command("retention_purge")  # nothing left to delete: no second audit event
    assert AuditEvent.objects.filter(action="retention.purged").count() == 1


def test_celery_beat_runs_the_purge() -> None:
    (entry,) = [e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == RETENTION_TASK]
    assert entry["schedule"] >= 60
    assert RETENTION_TASK in celery_app.tasks
    sweep = settings.CELERY_BEAT_SCHEDULE["analysis-sweep"]
    assert sweep["task"] == SWEEP_TASK and SWEEP_TASK in celery_app.tasks


def test_the_policy_over_rest_is_audited_and_each_workspace_sees_its_own(
    owner: Tenant, owner_api: APIClient, outsider_api: APIClient
) -> None:
    changed = owner_api.patch(
        "/api/v1/retention", {"transcripts_days": 30, "zero_retention": True}, format="json"
    )
    assert changed.status_code == 200, changed.content
    assert changed.json() == {
        "transcripts_days": 30, "tool_logs_days": None, "analysis_days": None,
        "recordings_days": None, "zero_retention": True, "redact_transcripts": False,
    }  # fmt: skip
    audit = AuditEvent.objects.get(action="retention.updated")
    assert audit.details == {"transcripts_days": 30, "zero_retention": True}
    assert outsider_api.get("/api/v1/retention").json()["zero_retention"] is False
    refused = owner_api.patch("/api/v1/retention", {"transcripts_days": 0}, format="json")
    assert refused.status_code == 400
    _, narrow = secret_services.api_key_create(
        workspace=owner.workspace, kind=ApiKey.Kind.SECRET, label="ro", scopes=["sessions:read"]
    )
    assert api_client(narrow).get("/api/v1/retention").status_code == 403


def test_session_end_webhook_payload_says_what_retention_kept(owner: Tenant) -> None:
    retention.retention_policy_update(workspace=owner.workspace, zero_retention=True)
    session = _session(owner)
    webhooks.endpoint_create(
        workspace=owner.workspace, url="https://hooks.example.com/x", events=["session.ended"]
    )
    (delivery,) = webhooks.session_ended_emit(
        session_id=session.pk, workspace_id=owner.workspace.pk
    )
    record = json.loads(delivery.payload)["data"]["session"]
    assert record["zero_retention"] is True and record["transcript"] == []
    assert record["tool_calls"][0]["arguments"] == {}
    assert TranscriptEntry.objects.filter(session=session).count() == 0


def test_owners_change_retention_on_the_dashboard_and_members_cannot(
    owner: Tenant, member: Tenant, client: Client
) -> None:
    page = reverse("dashboard:retention", args=[owner.workspace.pk])
    client.force_login(member.user)
    assert client.get(page).status_code == 403
    client.force_login(owner.user)
    assert "Zero retention" in client.get(page).content.decode()
    saved = client.post(page, {"transcripts_days": "14", "redact_transcripts": "on"})
    assert saved.status_code == 302
    policy = privacy.retention_policy(workspace=owner.workspace)
    assert (policy.transcripts_days, policy.redact_transcripts, policy.zero_retention) == (
        14, True, False,
    )  # fmt: skip
    refused = client.post(page, {"transcripts_days": "0"})
    assert (
        refused.status_code == 200
        and privacy.retention_policy(workspace=owner.workspace).transcripts_days == 14
    )
