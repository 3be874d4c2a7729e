"""The ``data`` of each event, built from the records (the same fields as the REST API)."""

from __future__ import annotations

import json
from typing import Any

from sessions_app.api import AnalysisOutput, SessionDetailOutput, ToolCallOutput
from sessions_app.close_reasons import close_reason_words
from sessions_app.models import Session, SessionAnalysis, ToolCallRecord

# The last transcript entry of a ``session.ended`` cut to WEBHOOK_PAYLOAD_MAX_BYTES.
TRUNCATED_MARKER = "[transcript truncated: the rest is on the session's page]"


def _agent(session: Session) -> dict[str, Any] | None:
    agent, version = session.agent, session.agent_version
    if agent is None:
        return None
    return {"slug": agent.slug, "name": agent.name, "version": version and version.number}


def session_ended(session: Session) -> dict[str, Any]:
    """Everything about a session that ended: who, when, why, what was said and done."""
    record = dict(SessionDetailOutput(session).data)
    record.pop("recording", None)  # a signed URL is a bearer link: never in a stored payload
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


# Cut in this order, each from its end, until the document fits.
def analysis_completed(analysis: SessionAnalysis) -> dict[str, Any]:
    """A finished analysis (its summary, verdicts and extracted data are bounded by the
    agent's settings, so no cutting is needed)."""
    session = analysis.session
    return {
        "session": {"id": str(session.public_id), "agent": _agent(session)},
        "analysis": dict(AnalysisOutput(analysis).data),
    }


_CUTTABLE = ("transcript", "tool_calls", "turns")


def _size(document: dict[str, Any]) -> int:
    return len(json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode())


def _keep_fitting(document: dict[str, Any], name: str, max_bytes: int) -> int:
    """Cut ``document["session"][name]`` to the longest head that fits; how many were cut."""
    session, entries = document["session"], list(document["session"][name])
    low, high = 0, len(entries)  # the longest head that fits is in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        session[name] = entries[:middle]
        if _size(document) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    session[name] = entries[:low]
    return len(entries) - low


def session_ended_capped(session: Session, max_bytes: int) -> dict[str, Any]:
    """``session_ended``, at most ``max_bytes`` of JSON: past it the transcript is cut (then
    the tool calls, then the turns) and ends with a marker entry; ``transcript_omitted``
    (and ``tool_calls_omitted``, ``turns_omitted``) say how many entries were left out."""
    document = session_ended(session)
    record = document["session"]
    for name in _CUTTABLE:
        record[f"{name}_omitted"] = 0
    if _size(document) <= max_bytes:
        return document
    marker = {"role": "system", "text": TRUNCATED_MARKER, "created_at": None}
    for name in _CUTTABLE:
        # Room for the marker, and for the counts' digits written after the cut.
        omitted = _keep_fitting(document, name, max_bytes - _size({"m": marker}) - 64)
        record[f"{name}_omitted"] = omitted
        if name == "transcript" and omitted:
            record["transcript"].append(marker)
        if _size(document) <= max_bytes:
            break
    return document
