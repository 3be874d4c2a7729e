"""Finding a session a ``resume`` names, and taking it over from another process.

The connection attaches to the host found here; a host on this process is used as it
is, one from another process is taken over (it hands over, or it died) and rebuilt here
from the resume store.
"""

from __future__ import annotations

import logging
from typing import Any

from channels.db import database_sync_to_async

from core import leases
from engine import metrics, protocol
from realtime import access as access_rules
from realtime import resume
from realtime.connection.building import epoch, new_session
from realtime.records import SessionRecorder
from realtime.session_setup import session_config_restore, session_plan_restore
from secrets_app import selectors as key_selectors

logger = logging.getLogger("realtime.connection")


async def stored_session(session_id: str, *, workspace_id: int) -> resume.StoredSession | None:
    """The session as the resume store has it; None when it is unknown, expired, another
    workspace's (whatever the token), or the store cannot be reached."""
    try:
        stored = await resume.resume_store().load(session_id)
    except Exception as exc:
        logger.warning("resume store unavailable: %s", type(exc).__name__)
        return None
    if stored is None or stored.meta.get("workspaceId") != workspace_id:
        return None
    return stored


def resume_allowed(stored: resume.StoredSession, access: access_rules.Access) -> bool:
    """A session resumes only through the key it started on (for a token: a token minted
    by the same secret key, for the same agent) and from the same page origin; anything
    else is refused like a wrong resume token. (A session stored by the release before
    these were kept has no origin or agent to compare: those two are not checked.)"""
    meta = stored.meta
    if meta.get("keyId") != access.key.pk or meta.get("origin", access.origin) != access.origin:
        return False
    token = access.token
    return token is None or meta.get("agentId", token.agent.pk) == token.agent.pk


def client_is_ahead(host: resume.SessionHost, message: protocol.ResumeMessage) -> bool:
    """The client counts events this session never sent: attached, it would hear nothing
    until the seqs caught up (its own dedupe by seq drops them too)."""
    return host.session is not None and message.last_seq > host.session.last_seq


async def take_over(
    message: protocol.ResumeMessage,
    stored: resume.StoredSession,
    *,
    access: access_rules.Access,
    channel_name: str,
) -> resume.SessionHost | None:
    """Become the owner of a session another process ran (it hands over, or it died),
    then rebuild it here. None: another process got it first, or it cannot be rebuilt."""
    store = resume.resume_store()
    session_id = message.session_id
    try:
        config = session_config_restore(stored.meta, resume_token=message.resume_token)
        channel = await resume.take_over(
            session_id=session_id, store=store, wait_s=resume.handover_wait_s(config)
        )
        latest = await store.load(session_id) if channel is not None else None
        if channel is None or latest is None:
            return None
        events = await store.events_after(session_id, message.last_seq)
        return await rebuild(
            message, latest, events, channel=channel, access=access, channel_name=channel_name
        )
    except Exception as exc:
        logger.warning("session %s: taking over failed: %s", session_id, type(exc).__name__)
        return None


async def rebuild(
    message: protocol.ResumeMessage,
    stored: resume.StoredSession,
    events: list[dict[str, Any]],
    *,
    channel: str,
    access: access_rules.Access,
    channel_name: str,
) -> resume.SessionHost:
    """Run, in a host of this process, the session ``stored`` describes."""
    plan = await database_sync_to_async(session_plan_restore)(
        meta=stored.meta,
        resume_token=message.resume_token,
        reply_channel=channel or channel_name,
    )
    recorder = SessionRecorder()
    await recorder.resume(session_id=message.session_id, workspace_id=access.workspace.pk)
    default_pools = (leases.workspace_pool(stored.meta["workspaceId"]),)
    pools = tuple(stored.meta.get("leasePools") or default_pools)
    key_id = int(stored.meta.get("keyId") or access.key.pk)
    host = resume.SessionHost(
        session_id=message.session_id,
        workspace_id=access.workspace.pk,
        channel=channel,
        recorder=recorder,
        lease_pools=pools,
        key_id=key_id,
    )
    # Never reuse a seq the client may have seen: the old process may have sent
    # events that its last write did not bring to the store.
    last_seq = max(
        int(stored.state.get("seq", 0)),
        events[-1]["seq"] if events else 0,
        message.last_seq,
    )
    session = new_session(plan, host, recorder, first_seq=last_seq)
    session.restore(stored.state)
    stops_at = await database_sync_to_async(key_selectors.api_key_stops_at)(
        workspace_id=access.workspace.pk, key_id=key_id
    )
    await host.begin(
        session, tool_runner=plan.tool_runner, events=events, key_expires_at=epoch(stops_at)
    )
    metrics.SESSIONS_LIVE.inc()  # it moved here; the old process counted it until now
    return host
