"""Who may open a socket: the key or token, its origin, the connection rate and the quota
(``quota_exceeded``, 4030)."""

from __future__ import annotations

from channels.db import database_sync_to_async

from engine.protocol import CloseCode, ErrorCode
from realtime import access as access_rules
from realtime import limits
from realtime.connection.refusals import Refusal, refused
from usage_app.quota_counters import session_start_refusal


async def admit(
    *, query: dict[str, str], origin: str | None, address: str
) -> access_rules.Access | Refusal:
    """The socket's access, or why it is refused. Raises ``UNAVAILABLE`` errors (Redis)."""
    try:
        access = await database_sync_to_async(access_rules.authorize_connection)(
            key=query.get("key", ""),
            token=query.get("token", ""),
            origin=origin,
            agent_slug=query.get("agent") or None,
            address=address,
        )
        refusal = await limits.connection_refusal(key_id=access.key.pk, address=access.address)
        over_quota = await database_sync_to_async(session_start_refusal)(
            workspace_id=access.workspace.pk
        )
    except access_rules.ConnectionRefused as error:
        return refused(error)
    if over_quota is not None:  # a workspace that used up a quota starts no new session
        return Refusal(CloseCode.QUOTA_EXCEEDED, ErrorCode.QUOTA_EXCEEDED, over_quota)
    if refusal is not None:
        return Refusal(CloseCode.TOO_MANY, ErrorCode.TOO_MANY_CONNECTIONS, refusal)
    return access
