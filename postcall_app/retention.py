"""Retention: how long a workspace keeps what its sessions said, and the job that deletes it.

A workspace's ``RetentionPolicy`` gives days per kind of record; ``retention_purge`` (run
by Celery beat every ``RETENTION_PURGE_INTERVAL_S``, or ``manage.py retention_purge``)
deletes what is older, per workspace, and records each purge that deleted anything in the
audit log (counts only). Metadata (who, when, how long, close codes, turn latencies) and
usage are kept: they hold nothing anyone said.

- transcripts: the transcript entries of the user and the agent, provider error details
  (they may quote a request), and the stored bodies of webhook events that carry them
  (``session.ended``, ``tool_call.failed``, ``analysis.completed``), once delivered or
  given up;
- tool logs: tool calls (arguments, results, errors) and tool console output;
- analysis: post-call analyses;
- recordings: session recordings, their rows and their stored objects (in an S3 bucket
  too: ``sessions_app.recordings`` deletes the object once the row's deletion commits).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from secrets_app.audit import SYSTEM, Actor, audit_record
from secrets_app.models import Workspace
from sessions_app.models import (
    Recording,
    RetentionPolicy,
    SessionAnalysis,
    SessionError,
    ToolCallRecord,
    TranscriptEntry,
)
from sessions_app.privacy import retention_policy
from webhooks_app.models import EventType, WebhookDelivery

RETENTION_DAYS_MAX = 3650
POLICY_FIELDS = (
    "transcripts_days", "tool_logs_days", "analysis_days", "recordings_days", "zero_retention",
    "redact_transcripts",
)  # fmt: skip
_SAYING_EVENTS = (
    EventType.SESSION_ENDED, EventType.TOOL_CALL_FAILED, EventType.ANALYSIS_COMPLETED,
)  # fmt: skip
_SETTLED = (WebhookDelivery.Status.SUCCEEDED, WebhookDelivery.Status.FAILED)
Role = TranscriptEntry.Role


def retention_policy_update(
    *, workspace: Workspace, actor: Actor = SYSTEM, **fields: Any
) -> RetentionPolicy:
    """Change the workspace's policy (audited with what changed). Days: 1 to
    ``RETENTION_DAYS_MAX``, or None (kept until deleted)."""
    unknown = set(fields) - set(POLICY_FIELDS)
    if unknown:
        raise TypeError(f"unknown retention fields: {sorted(unknown)}")
    with transaction.atomic():
        policy, _ = RetentionPolicy.objects.select_for_update().get_or_create(workspace=workspace)
        before = {name: getattr(policy, name) for name in POLICY_FIELDS}
        for name, value in fields.items():
            setattr(policy, name, value)
        policy.updated_at = timezone.now()
        policy.save()
        changed = {n: getattr(policy, n) for n in POLICY_FIELDS if getattr(policy, n) != before[n]}
        if changed:
            audit_record(
                workspace=workspace, actor=actor, action="retention.updated", details=changed
            )
    return policy


def _cutoff(now: datetime, days: int | None) -> datetime | None:
    return None if days is None else now - timedelta(days=days)


def _purge_transcripts(workspace_id: int, before: datetime) -> dict[str, int]:
    sessions = {"session__workspace_id": workspace_id, "session__ended_at__lt": before}
    entries, _ = TranscriptEntry.objects.filter(
        role__in=[Role.USER, Role.ASSISTANT], **sessions
    ).delete()
    details = SessionError.objects.filter(**sessions).exclude(detail="").update(detail="")
    _, deleted = WebhookDelivery.objects.filter(
        workspace_id=workspace_id, event_type__in=_SAYING_EVENTS, status__in=_SETTLED,
        created_at__lt=before,
    ).delete()  # fmt: skip
    deliveries = deleted.get(WebhookDelivery._meta.label, 0)
    return {"transcript_entries": entries, "error_details": details, "webhook_events": deliveries}


def _purge_tool_logs(workspace_id: int, before: datetime) -> dict[str, int]:
    sessions = {"session__workspace_id": workspace_id, "session__ended_at__lt": before}
    calls, _ = ToolCallRecord.objects.filter(**sessions).delete()
    consoles, _ = TranscriptEntry.objects.filter(role=Role.TOOL, **sessions).delete()
    return {"tool_calls": calls, "tool_consoles": consoles}


def _purge_analysis(workspace_id: int, before: datetime) -> dict[str, int]:
    analyses, _ = SessionAnalysis.objects.filter(
        workspace_id=workspace_id, completed_at__lt=before
    ).delete()
    return {"analyses": analyses}


def _purge_recordings(workspace_id: int, before: datetime) -> dict[str, int]:
    recordings, _ = Recording.objects.filter(
        workspace_id=workspace_id, session__ended_at__lt=before
    ).delete()
    return {"recordings": recordings}


def retention_purge_workspace(
    *, workspace: Workspace, now: datetime | None = None
) -> dict[str, int]:
    """Delete what the workspace's policy no longer keeps; how many of each, audited."""
    now = now or timezone.now()
    policy = retention_policy(workspace=workspace)
    counts: dict[str, int] = {}
    with transaction.atomic():
        if (before := _cutoff(now, policy.transcripts_days)) is not None:
            counts.update(_purge_transcripts(workspace.pk, before))
        if (before := _cutoff(now, policy.tool_logs_days)) is not None:
            counts.update(_purge_tool_logs(workspace.pk, before))
        if (before := _cutoff(now, policy.analysis_days)) is not None:
            counts.update(_purge_analysis(workspace.pk, before))
        if (before := _cutoff(now, policy.recordings_days)) is not None:
            counts.update(_purge_recordings(workspace.pk, before))
        deleted = {name: count for name, count in counts.items() if count}
        if deleted:
            audit_record(
                workspace=workspace, actor=SYSTEM, action="retention.purged", details=deleted
            )
    return deleted


def retention_purge(*, now: datetime | None = None) -> dict[int, dict[str, int]]:
    """Purge every workspace that set a retention period; what was deleted, by workspace."""
    with_days = RetentionPolicy.objects.exclude(
        transcripts_days__isnull=True,
        tool_logs_days__isnull=True,
        analysis_days__isnull=True,
        recordings_days__isnull=True,
    ).select_related("workspace")
    purged = {}
    for policy in with_days:
        deleted = retention_purge_workspace(workspace=policy.workspace, now=now)
        if deleted:
            purged[policy.workspace_id] = deleted
    return purged
