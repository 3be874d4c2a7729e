"""The ``data`` of each event, built from the records (the same fields as the REST API)."""

from __future__ import annotations

from typing import Any

from sessions_app.api import SessionDetailOutput, ToolCallOutput
from sessions_app.close_reasons import close_reason_words
from sessions_app.models import Session, ToolCallRecord


def _agent(session: Session) -> dict[str, str] | None:
    agent = session.agent
    return None if agent is None else {"slug": agent.slug, "name": agent.name}


def session_ended(session: Session) -> dict[str, Any]:
    """Everything about a session that ended: who, when, why, what was said and done."""
    record = dict(SessionDetailOutput(session).data)
    ended = session.ended_at or session.started_at
    record.update(
        agent=_agent(session),
        key_label=session.api_key.label if session.api_key is not None else None,
        # Kept by session tokens that carry one (not every platform version records it).
        end_user_label=getattr(session, "end_user_label", None) or None,
        duration_seconds=round((ended - session.started_at).total_seconds(), 3),
        close_reason=close_reason_words(session.close_code),
    )
    return {"session": record}


def tool_call_failed(session: Session, call: ToolCallRecord) -> dict[str, Any]:
    return {
        "session": {"id": str(session.public_id), "agent": _agent(session)},
        "tool_call": dict(ToolCallOutput(call).data),
    }
