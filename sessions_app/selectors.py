"""Reads for agents and session records, always scoped to a workspace."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from django.db.models import Q, QuerySet
from django.shortcuts import get_object_or_404

from secrets_app.models import Workspace
from sessions_app.models import Agent, Session


def agent_list(*, workspace: Workspace) -> QuerySet[Agent]:
    return Agent.objects.filter(workspace=workspace)


def agent_get(*, workspace: Workspace, slug: str) -> Agent:
    return get_object_or_404(Agent, workspace=workspace, slug=slug)


def agent_find(*, workspace: Workspace, slug: str) -> Agent | None:
    if "\x00" in slug:  # never in a slug, and PostgreSQL refuses it in a query
        return None
    return Agent.objects.filter(workspace=workspace, slug=slug).first()


# Close codes of sessions that ended as they should: normal closure, the page went away,
# or a close frame without a code. Anything else ended in a refusal or an error.
NORMAL_CLOSE_CODES = (1000, 1001, 1005)

SessionStatus = Literal["live", "ended", "failed"]
INLINE_CONFIG: Literal["inline"] = "inline"


def session_list(
    *,
    workspace: Workspace,
    agent: Agent | Literal["inline"] | None = None,
    status: SessionStatus | None = None,
    started_after: datetime | None = None,
    origin_contains: str = "",
) -> QuerySet[Session]:
    """Newest first. ``agent="inline"``: sessions configured by the browser, not an agent."""
    sessions = Session.objects.filter(workspace=workspace).select_related("agent", "agent_version")
    if agent == INLINE_CONFIG:
        sessions = sessions.filter(agent__isnull=True)
    elif agent is not None:
        sessions = sessions.filter(agent=agent)
    if status is not None:
        sessions = sessions.filter(_STATUS[status])
    if started_after is not None:
        sessions = sessions.filter(started_at__gte=started_after)
    if origin_contains:
        sessions = sessions.filter(origin__icontains=origin_contains)
    return sessions


_ENDED_NORMALLY = Q(close_code__isnull=True) | Q(close_code__in=NORMAL_CLOSE_CODES)
_STATUS: dict[str, Q] = {
    "live": Q(ended_at__isnull=True),
    "ended": Q(ended_at__isnull=False) & _ENDED_NORMALLY,
    "failed": Q(ended_at__isnull=False) & ~_ENDED_NORMALLY,
}


def session_get(*, workspace: Workspace, public_id: str) -> Session:
    return get_object_or_404(
        Session.objects.select_related("agent", "agent_version", "api_key").prefetch_related(
            "transcript", "turns", "tool_calls"
        ),
        workspace=workspace,
        public_id=public_id,
    )


def session_record_find(*, workspace_id: int, session_id: str) -> Session | None:
    """A live session's record by its session id (the hex form of ``public_id``)."""
    try:
        public_id = uuid.UUID(hex=session_id)
    except ValueError:
        return None
    return Session.objects.filter(workspace_id=workspace_id, public_id=public_id).first()
