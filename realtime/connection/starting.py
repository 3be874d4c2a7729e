"""A new session from a ``configure``: its plan, its record, its host."""

from __future__ import annotations

from collections.abc import Callable

from channels.db import database_sync_to_async

from engine import protocol
from engine.doors.door import CallControl
from engine.session import VoiceSession
from engine.session.system_tools import phone_tools
from realtime import access as access_rules
from realtime import resume
from realtime.connection.building import epoch, new_session
from realtime.connection.refusals import Refusal, refused
from realtime.connection.setup_leases import SetupLeases
from realtime.records import SessionRecorder
from realtime.session_setup import ConfigureRefused, SessionPlan, session_meta, session_plan_build


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
    places: SetupLeases,
    first_seq: int,
    call: CallControl | None = None,
    played_ms: Callable[[], float | None] | None = None,
) -> tuple[resume.SessionHost, VoiceSession]:
    """Start the session's record, then run the session (not started yet) in a new host
    that takes over the ``places`` held. ``first_seq``: the last seq the connection sent itself.
    ``call``: the phone call the door carries (its system tools), None for a browser;
    ``played_ms``: the door's account of what its peer played (``Door.played_ms``)."""
    if call is not None:
        plan.config.tools = phone_tools(plan.config.tools)
    await recorder.start(
        session_id=session_id,
        access=access,
        mode=plan.config.mode,
        agent=plan.agent,
        agent_version=plan.agent_version,
        record_audio=plan.record_audio,
    )
    pools = places.hand_over()  # the host keeps them: same session id
    host = resume.SessionHost(
        session_id=session_id,
        workspace_id=access.workspace.pk,
        channel=channel,
        recorder=recorder,
        lease_pools=pools,
        key_id=access.key.pk,
    )
    session = new_session(plan, host, recorder, first_seq=first_seq, call=call, played_ms=played_ms)
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
