"""Writes for agents and session records."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from secrets_app.models import ApiKey, Workspace
from sessions_app.models import Agent, Session, TranscriptEntry
from sessions_app.tool_definitions import clean_tool_definitions

AGENT_FIELDS = (
    "name", "slug", "instructions", "greeting", "voice", "mode",
    "llm_model", "stt_provider", "tts_provider",
)  # fmt: skip


def handler_sha256(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def agent_tools_clean(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools as stored: validated, with the hash that pins each saved handler."""
    pinned = []
    for tool in clean_tool_definitions(tools):
        if tool.get("handler") is not None:
            tool = {**tool, "handler_sha256": handler_sha256(tool["handler"])}
        pinned.append(tool)
    return pinned


def _save(agent: Agent) -> Agent:
    try:
        with transaction.atomic():
            agent.save()
    except IntegrityError:
        raise ValidationError(
            {"slug": [f"an agent with slug {agent.slug!r} already exists"]}
        ) from None
    return agent


def agent_create(
    *, workspace: Workspace, tools: list[dict[str, Any]] | None = None, **fields: Any
) -> Agent:
    unknown = set(fields) - set(AGENT_FIELDS)
    if unknown:
        raise TypeError(f"unknown agent fields: {sorted(unknown)}")
    agent = Agent(workspace=workspace, tools=agent_tools_clean(tools or []), **fields)
    return _save(agent)


def agent_update(
    *, agent: Agent, tools: list[dict[str, Any]] | None = None, **fields: Any
) -> Agent:
    for name, value in fields.items():
        if name not in AGENT_FIELDS:
            raise TypeError(f"unknown agent field {name!r}")
        setattr(agent, name, value)
    if tools is not None:
        agent.tools = agent_tools_clean(tools)
    agent.updated_at = timezone.now()
    return _save(agent)


def agent_delete(*, agent: Agent) -> None:
    agent.delete()


# ---------------------------------------------------------------- session records


def session_record_start(
    *, session_id: str, workspace: Workspace, api_key: ApiKey, origin: str, mode: str,
    agent: Agent | None,
) -> Session:  # fmt: skip
    return Session.objects.create(
        public_id=uuid.UUID(hex=session_id),
        workspace=workspace,
        api_key=api_key,
        agent=agent,
        origin=origin[:255],
        mode=mode,
    )


def session_record_append(*, session: Session, entries: list[tuple[str, str]]) -> None:
    TranscriptEntry.objects.bulk_create(
        TranscriptEntry(session=session, role=role, text=text) for role, text in entries
    )


def session_record_count(*, session: Session, turns: int = 0, tool_calls: int = 0) -> None:
    Session.objects.filter(pk=session.pk, workspace_id=session.workspace_id).update(
        turn_count=F("turn_count") + turns, tool_call_count=F("tool_call_count") + tool_calls
    )


def session_record_end(*, session: Session, close_code: int | None) -> None:
    Session.objects.filter(pk=session.pk, workspace_id=session.workspace_id).update(
        ended_at=timezone.now(), close_code=close_code
    )
