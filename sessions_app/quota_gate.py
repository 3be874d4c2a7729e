"""A workspace that used up a quota starts no new session (``quota_exceeded``, 4030)."""

from __future__ import annotations

from secrets_app.models import Workspace
from sessions_app.access import CLOSE_QUOTA_EXCEEDED, ConnectionRefused
from sessions_app.protocol import ErrorCode
from usage_app.quotas import workspace_exceeded_message


def quota_gate(*, workspace: Workspace) -> None:
    message = workspace_exceeded_message(workspace_id=workspace.pk)
    if message is not None:
        raise ConnectionRefused(CLOSE_QUOTA_EXCEEDED, ErrorCode.QUOTA_EXCEEDED, message)
