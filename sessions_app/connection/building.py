"""A session and its host, put together the same way for a new session and a rebuilt one."""

from __future__ import annotations

from datetime import datetime

from sessions_app import limits, resume
from sessions_app.orchestrator import VoiceSession
from sessions_app.records import SessionRecorder
from sessions_app.session_setup import SessionPlan


def new_host(
    *,
    session_id: str,
    workspace_id: int,
    channel: str,
    recorder: SessionRecorder,
    pools: tuple[str, ...],
    key_id: int,
) -> resume.SessionHost:
    return resume.SessionHost(
        session_id=session_id,
        workspace_id=workspace_id,
        channel=channel,
        recorder=recorder,
        lease_pools=pools,
        key_id=key_id,
    )


def new_session(
    plan: SessionPlan, host: resume.SessionHost, recorder: SessionRecorder, *, first_seq: int
) -> VoiceSession:
    return VoiceSession(
        config=plan.config,
        llm=plan.llm,
        stt=plan.stt,
        tts=plan.tts,
        tool_runner=plan.tool_runner,
        emit=host.emit,
        send_audio=host.send_audio,
        on_tool_settled=recorder.tool_settled,
        first_seq=first_seq,
        guard=limits.SessionLimits(session_id=plan.config.session_id, key_id=host.key_id),
    )


def epoch(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None
