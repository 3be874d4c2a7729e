"""At most N sandbox calls of one workspace at once, across every web process (Redis).

The production queue is shared by all workspaces, first come first served: without a
cap, one workspace's busy loops would take every worker and everyone else would wait.
A session takes a slot of its workspace before it queues a call and gives it back when
the outcome arrives (or its deadline passes; a slot left by a dead process expires).
A call that finds no free slot asks again shortly, until one is free.

The embedded default needs none of this: its pool schedules per workspace itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from sessions_app.live import lease_take, redis_client

FIRST_POLL_S = 0.01
WAKE_POLL_S = 0.1  # a freed slot is seen within this


class NoSlot(Exception):
    """The deadline passed while every slot of the workspace was busy."""


def _key(workspace_id: int) -> str:
    return f"voice:sandbox:{workspace_id}"


async def _try(workspace_id: int, call_id: str, limit: int, hold_s: float) -> bool:
    return await lease_take(_key(workspace_id), call_id, limit=limit, hold_s=hold_s)


@contextlib.asynccontextmanager
async def workspace_slot(
    *, workspace_id: int, member: str, limit: int, hold_s: float, wait_s: float
) -> AsyncIterator[None]:
    """Hold one of the workspace's ``limit`` slots for at most ``hold_s`` seconds.

    ``member`` names the call uniquely across sessions (session id and call id). A call
    that finds none free asks again after a short wait, growing to WAKE_POLL_S: a waiter
    never holds a Redis connection while it waits (hundreds of waiting calls must not
    take the process's connections from everyone else).
    """
    loop = asyncio.get_running_loop()
    give_up = loop.time() + wait_s
    pause = FIRST_POLL_S
    while not await _try(workspace_id, member, limit, hold_s):
        left = give_up - loop.time()
        if left <= 0:
            raise NoSlot(f"all {limit} tool slots of this workspace stayed busy")
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, WAKE_POLL_S)
    try:
        yield
    finally:
        await asyncio.shield(_release(workspace_id, member))


async def _release(workspace_id: int, member: str) -> None:
    await redis_client().zrem(_key(workspace_id), member)
