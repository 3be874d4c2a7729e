"""The leases (places) a new session takes in the session limits while the connection sets
it up.

Two pools: the sessions of one key from one client address, and the workspace's. Once
the session runs, its host holds the places (same session id) and renews them.
"""

from __future__ import annotations

import contextlib

from django.conf import settings

from core import leases
from engine.protocol import CloseCode, ErrorCode
from realtime import access as access_rules
from realtime.connection.refusals import Refusal


def workspace_limit(access: access_rules.Access) -> int:
    return int(access.workspace.session_limit or settings.SESSION_LIMIT_PER_WORKSPACE)


class SetupLeases:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._pools: tuple[str, ...] = ()

    async def acquire(self, access: access_rules.Access) -> Refusal | None:
        """A place from this client address, then in the workspace; or why not (then
        nothing is held)."""
        by_address = leases.address_pool(access.key.pk, access.address)
        if not await leases.acquire(
            pool=by_address, session_id=self.session_id, limit=settings.SESSIONS_PER_ADDRESS
        ):
            return Refusal(
                CloseCode.TOO_MANY,
                ErrorCode.TOO_MANY_SESSIONS_FROM_ADDRESS,
                f"this address already has {settings.SESSIONS_PER_ADDRESS} sessions open "
                "with this key",
            )
        self._pools = (by_address,)
        workspace = leases.workspace_pool(access.workspace.pk)
        limit = workspace_limit(access)
        if not await leases.acquire(pool=workspace, session_id=self.session_id, limit=limit):
            await self.release()
            return Refusal(
                CloseCode.TOO_MANY,
                ErrorCode.TOO_MANY_SESSIONS,
                f"this workspace already has {workspace_limit(access)} sessions open",
            )
        self._pools = (workspace, by_address)
        return None

    def hand_over(self) -> tuple[str, ...]:
        """The pools held, for the session's host to keep: this no longer releases them."""
        pools, self._pools = self._pools, ()
        return pools

    async def release(self) -> None:
        pools, self._pools = self._pools, ()
        for pool in pools:
            with contextlib.suppress(Exception):
                await leases.release(pool=pool, session_id=self.session_id)
