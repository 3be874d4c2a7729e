"""A session and its host, put together the same way for a new session and a rebuilt one."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from engine.doors.door import CallControl
from engine.session import VoiceSession
from realtime import limits, resume
from realtime.records import SessionRecorder
from realtime.session_setup import SessionPlan


def new_session(
    plan: SessionPlan,
    host: resume.SessionHost,
    recorder: SessionRecorder,
    *,
    first_seq: int,
    call: CallControl | None = None,
    played_ms: Callable[[], float | None] | None = None,
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
        scrub=plan.scrubber,
        on_provider_error=recorder.provider_error,
        first_seq=first_seq,
        call=call,
        played_ms=played_ms,
        guard=limits.SessionLimits(
            session_id=plan.config.session_id,
            key_id=host.key_id,
            workspace_id=plan.config.workspace_id,
        ),
    )


def epoch(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None
