"""Live-session control from outside the session: end a key's sessions, end one session,
have one say a text in the agent's voice, and close the records of sessions whose process is gone.

A session runs on one web process; these functions run anywhere (a view, a command, the
process where a key was revoked). They reach the session through the channel layer: every
session host is in its key's group and its own group (``resume.host``), and ends itself
within a second of the message. Records of sessions that no process holds any more (the
platform restarted, a process was killed) are recognised by their lapsed lease in the
workspace's session limit and closed with 1012.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.utils import timezone

from core import leases
from core.channel_messages import ChannelMessage, SessionEnd, SessionKeyExpires, SessionSay, encode
from engine.protocol import CloseCode
from realtime.resume.host import key_group, session_group
from realtime.resume.store import resume_state_delete_sync
from secrets_app.audit import SYSTEM, Actor, audit_record
from secrets_app.models import ApiKey, Workspace
from sessions_app import services
from sessions_app.models import Session

logger = logging.getLogger(__name__)

# A record younger than this may belong to a session still taking its lease.
ORPHAN_GRACE = timedelta(seconds=30)


def _group_send(group: str, message: ChannelMessage) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, encode(message))
    except Exception as exc:  # the sessions end at their next limit or never resume
        logger.error("live-session control: %s to %s failed: %s", message.TYPE, group,
                     type(exc).__name__)  # fmt: skip


def key_sessions_end(*, key_id: int, at: datetime | None = None) -> None:
    """End the live sessions of a key now (revoked), or when it expires (``at``)."""
    if at is None or at <= timezone.now():
        _group_send(key_group(key_id), SessionEnd("key_revoked"))
    else:
        _group_send(key_group(key_id), SessionKeyExpires(at.timestamp()))


def on_api_key_disabled(sender: Any, *, key: ApiKey, at: datetime | None, **_: Any) -> None:
    key_sessions_end(key_id=key.pk, at=at)


def session_end(*, session: Session, actor: Actor = SYSTEM) -> Session:
    """End a live session (the dashboard's button, ``POST /sessions/{id}/end``).

    Its host closes the socket with 4009; the record is closed here as well, so a session
    whose process is gone is ended too.
    """
    if session.ended_at is not None:
        return session
    _group_send(session_group(session.public_id.hex), SessionEnd("ended"))
    try:
        resume_state_delete_sync(session.public_id.hex)
    except Exception as exc:  # it expires on its own within minutes
        logger.warning("session end: resume state kept: %s", type(exc).__name__)
    services.session_record_end(session=session, close_code=CloseCode.ENDED)
    audit_record(
        workspace=session.workspace, actor=actor, action="session.ended",
        target=str(session.public_id),
    )  # fmt: skip
    session.refresh_from_db(fields=["ended_at", "close_code"])
    return session


def session_say(*, session_id: str, text: str, then_end_call: bool = False) -> None:
    """Have a live session say ``text`` now, in the agent's voice and as the agent's words
    (not asking the LLM); ``then_end_call``: its phone call ends once ``text`` is heard."""
    _group_send(session_group(session_id), SessionSay(text, then_end_call))


def sessions_sweep(*, workspace: Workspace | None = None) -> int:
    """Close the records of live sessions that no web process holds; returns how many."""
    live_records = Session.objects.filter(
        ended_at__isnull=True, started_at__lt=timezone.now() - ORPHAN_GRACE
    )
    if workspace is not None:
        live_records = live_records.filter(workspace=workspace)
    by_workspace: dict[int, set[str]] = {}
    for workspace_id, public_id in live_records.values_list("workspace_id", "public_id"):
        by_workspace.setdefault(workspace_id, set()).add(public_id.hex)
    ended = 0
    for workspace_id, session_ids in by_workspace.items():
        try:
            held = leases.holders_sync(pool=leases.workspace_pool(workspace_id))
        except Exception as exc:  # Redis away: nothing can be told apart; try next time
            logger.warning("session sweep skipped: %s", type(exc).__name__)
            return ended
        orphans = session_ids - held
        if orphans:
            ended += services.session_record_end_orphans(
                workspace_id=workspace_id, session_ids=orphans, close_code=CloseCode.RESTART
            )
    if ended:
        logger.info("session sweep: %d records of sessions no process holds were closed", ended)
    return ended
