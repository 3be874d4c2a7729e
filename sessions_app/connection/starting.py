"""A new session from a ``configure``: its plan, its record, its host."""

from __future__ import annotations

from channels.db import database_sync_to_async

from sessions_app import access as access_rules
from sessions_app import protocol, resume
from sessions_app.connection.building import epoch, new_host, new_session
from sessions_app.connection.places import Places
from sessions_app.connection.refusals import Refusal, refused
from sessions_app.orchestrator import VoiceSession
from sessions_app.records import SessionRecorder
from sessions_app.session_setup import (
    ConfigureRefused,
    SessionPlan,
    session_meta,
    session_plan_build,
)


async def plan_build(
    *,
    access: access_rules.Access,
    configure: protocol.ConfigureMessage,
    session_id: str,
    resume_token: str,
    reply_channel: str,
) -> SessionPlan | Refusal:
    """What the session will be, or why not (a ``Refusal`` without a close code: the
    client may send a corrected configure)."""
    try:
        return await database_sync_to_async(session_plan_build)(
            access=access,
            configure=configure,
            session_id=session_id,
            resume_token=resume_token,
            reply_channel=reply_channel,
        )
    except (access_rules.ConnectionRefused, ConfigureRefused) as error:
        return refused(error)


async def host_begin(
    plan: SessionPlan,
    *,
    access: access_rules.Access,
    recorder: SessionRecorder,
    session_id: str,
    resume_token: str,
    channel: str,
    places: Places,
    first_seq: int,
) -> tuple[resume.SessionHost, VoiceSession]:
    """Start the session's record, then run the session (not started yet) in a new host
    that takes over the ``places`` held. ``first_seq``: the last seq the connection sent itself."""
    await recorder.start(
        session_id=session_id, access=access, mode=plan.config.mode, agent=plan.agent
    )
    pools = places.hand_over()  # the host keeps them: same session id
    host = new_host(
        session_id=session_id,
        workspace_id=access.workspace.pk,
        channel=channel,
        recorder=recorder,
        pools=pools,
        key_id=access.key.pk,
    )
    session = new_session(plan, host, recorder, first_seq=first_seq)
    meta = session_meta(
        plan, access=access, token_digest=resume.token_digest(resume_token), lease_pools=pools
    )
    await host.begin(
        session,
        tool_runner=plan.tool_runner,
        meta=meta,
        key_expires_at=epoch(access.key.expires_at),
    )
    return host, session
