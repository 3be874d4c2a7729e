"""Writes of usage: a session's delta goes to its own totals and to its day's aggregate.

Called from the session's record writer, off the event loop, after each turn and when
the session ends; then the workspace's quotas are checked.
"""

from __future__ import annotations

import logging
from datetime import date
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from secrets_app.audit import Actor, audit_record
from secrets_app.models import Workspace
from sessions_app.models import Session
from sessions_app.usage_figures import RECORD_FIELDS
from usage_app import quota_counters, quotas
from usage_app.models import QuotaAlert, UsageDaily
from webhooks_app import services as webhooks

logger = logging.getLogger(__name__)


def _clean(usage: dict[str, Any]) -> dict[str, int]:
    """Only known figures, as non-negative integers (the delta came through a queue)."""
    return {
        name: int(value)
        for name in RECORD_FIELDS
        if isinstance(value := usage.get(name), int) and not isinstance(value, bool) and value > 0
    }


@transaction.atomic
def usage_record(*, session: Session, usage: dict[str, Any], ended: bool = False) -> None:
    """Add ``usage`` to the session's totals and to today's aggregate of its agent;
    ``ended``: the session is over, and counts once in the day's sessions."""
    delta = _clean(usage)
    if delta:
        row = Session.objects.select_for_update().get(
            pk=session.pk, workspace_id=session.workspace_id
        )
        totals = {name: int((row.usage or {}).get(name, 0)) for name in RECORD_FIELDS}
        for name, value in delta.items():
            totals[name] += value
        Session.objects.filter(pk=row.pk).update(usage=totals)
    if delta or ended:
        _add_to_day(session, timezone.now().date(), delta, sessions=1 if ended else 0)
    if delta:
        quota_counters.usage_add(workspace_id=session.workspace_id, delta=delta)


def _add_to_day(session: Session, day: date, delta: dict[str, int], *, sessions: int) -> None:
    agent = session.agent
    key = agent.pk if agent is not None else 0
    increments: dict[str, Any] = {name: F(name) + value for name, value in delta.items()}
    if sessions:
        increments["sessions"] = F("sessions") + sessions
    rows = UsageDaily.objects.filter(workspace_id=session.workspace_id, day=day, agent_key=key)
    if rows.update(**increments):
        return
    try:
        with transaction.atomic():
            UsageDaily.objects.create(
                workspace_id=session.workspace_id,
                day=day,
                agent=agent,
                agent_key=key,
                agent_name=agent.name if agent is not None else "",
                sessions=sessions,
                **delta,
            )
    except IntegrityError:  # another process made the row a moment ago
        rows.update(**increments)


def quota_check(*, workspace_id: int) -> str | None:
    """After new usage: raise the quota alerts now due (webhooks included); the words to
    tell a running session when a quota is used up, else None."""
    states = quotas.quota_alerts_raise(workspace_id=workspace_id, on_new_alert=_alerted)
    return quotas.exceeded_message(states)


def _alerted(alert: QuotaAlert, state: quotas.QuotaState) -> None:
    logger.info(
        "quota %s: workspace=%s metric=%s period=%s",
        alert.level, alert.workspace_id, alert.metric, alert.period,
    )  # fmt: skip
    event = "quota.warning" if alert.level == QuotaAlert.Level.WARNING else "quota.exceeded"
    webhooks.event_emit(
        workspace_id=alert.workspace_id,
        event_type=event,
        data={"quota": {**state.as_dict(), "words": state.words()}},
    )


def usage_exported(
    *, workspace: Workspace, actor: Actor, start: date, end: date, group_by: str
) -> None:
    """An export leaves the platform: the audit log says who took which range, from where."""
    audit_record(
        workspace=workspace, actor=actor, action="usage.exported", target=f"{start} to {end}",
        details={"format": "csv", "group_by": group_by},
    )  # fmt: skip
