"""Writes for agents and session records."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from pydantic import ValidationError as PydanticError

from secrets_app.models import ApiKey, Workspace
from sessions_app import protocol
from sessions_app.models import Agent, Session, TranscriptEntry, TurnRecord
from tools_app.schema import SchemaError, to_json_schema

AGENT_FIELDS = (
    "name", "slug", "instructions", "greeting", "voice", "mode",
    "llm_model", "stt_provider", "tts_provider",
)  # fmt: skip


def handler_sha256(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def _declared_tools(tools: list[Any]) -> list[protocol.ToolDeclaration]:
    """The same rules as a browser's configure, so a saved agent always loads."""
    try:
        message = protocol.ConfigureMessage.model_validate(
            {"type": "configure", "tools": tools}, by_alias=True, by_name=False
        )
    except PydanticError as exc:
        raise ValidationError(protocol.describe_errors(exc)) from None
    declared = list(message.tools or [])
    for index, tool in enumerate(declared):
        try:
            to_json_schema(tool.parameters)
        except SchemaError as exc:
            raise ValidationError(f"tools[{index}].{exc}") from None
    return declared


def agent_tools_clean(tools: list[Any]) -> list[dict[str, Any]]:
    """Tools as stored: validated, with the hash that pins each saved handler."""
    pinned = []
    for declared in _declared_tools(tools):
        tool = declared.model_dump(by_alias=True, exclude_none=True)
        if declared.handler is not None:
            tool["handler_sha256"] = handler_sha256(declared.handler)
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


def session_record_turn(*, session: Session, metrics: dict[str, Any]) -> None:
    TurnRecord.objects.create(session=session, turn_id=metrics["turnId"], metrics=metrics)


def session_record_count(*, session: Session, turns: int = 0, tool_calls: int = 0) -> None:
    Session.objects.filter(pk=session.pk, workspace_id=session.workspace_id).update(
        turn_count=F("turn_count") + turns, tool_call_count=F("tool_call_count") + tool_calls
    )


def session_record_tool_log(
    *, workspace_id: int, session_id: str, tool_name: str, console: str
) -> None:
    """A server tool's console output, kept with the session (never in the logs)."""
    session = Session.objects.filter(
        workspace_id=workspace_id, public_id=uuid.UUID(hex=session_id)
    ).first()
    if session is not None:
        TranscriptEntry.objects.create(
            session=session,
            role=TranscriptEntry.Role.TOOL,
            text=f"{tool_name} console:\n{console.rstrip()}",
        )


def session_record_end(*, session: Session, close_code: int | None) -> None:
    Session.objects.filter(pk=session.pk, workspace_id=session.workspace_id).update(
        ended_at=timezone.now(), close_code=close_code
    )
