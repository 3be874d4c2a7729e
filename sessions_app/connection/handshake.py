"""Who may open a socket: the key or token, its origin, the connection rate and the quota."""

from __future__ import annotations

from channels.db import database_sync_to_async

from sessions_app import access as access_rules
from sessions_app import limits
from sessions_app.connection.refusals import Refusal, refused
from sessions_app.protocol import ErrorCode
from sessions_app.quota_gate import quota_gate


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
        await database_sync_to_async(quota_gate)(workspace=access.workspace)
    except access_rules.ConnectionRefused as error:
        return refused(error)
    if refusal is not None:
        return Refusal(access_rules.CLOSE_TOO_MANY, ErrorCode.TOO_MANY_CONNECTIONS, refusal)
    return access
