"""At most N sandbox calls of one workspace at once, across every web process (Redis).

The production queue is shared by all workspaces, first come first served: without a
cap, one workspace's busy loops would take every worker and everyone else would wait.
A session takes a slot of its workspace before it queues a call and gives it back when
the outcome arrives (or its deadline passes; a slot left by a dead process expires).
A call that finds no free slot waits for one, woken when a slot is given back.

The embedded default needs none of this: its pool schedules per workspace itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from sessions_app.live import lease_take, redis_client

WAKE_POLL_S = 0.25  # a missed wake-up costs at most this


class NoSlot(Exception):
    """The deadline passed while every slot of the workspace was busy."""


def _keys(workspace_id: int) -> tuple[str, str]:
    return f"voice:sandbox:{workspace_id}", f"voice:sandbox:{workspace_id}:freed"


async def _try(workspace_id: int, call_id: str, limit: int, hold_s: float) -> bool:
    slots, _ = _keys(workspace_id)
    return await lease_take(slots, call_id, limit=limit, hold_s=hold_s)


@contextlib.asynccontextmanager
async def workspace_slot(
    *, workspace_id: int, call_id: str, limit: int, hold_s: float, wait_s: float
) -> AsyncIterator[None]:
    """Hold one of the workspace's ``limit`` slots for at most ``hold_s`` seconds."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + wait_s
    _, freed = _keys(workspace_id)
    while not await _try(workspace_id, call_id, limit, hold_s):
        left = give_up - loop.time()
        if left <= 0:
            raise NoSlot(f"all {limit} tool slots of this workspace stayed busy")
        await redis_client().blpop([freed], timeout=min(WAKE_POLL_S, left))
    try:
        yield
    finally:
        await _release(workspace_id, call_id)


async def _release(workspace_id: int, call_id: str) -> None:
    slots, freed = _keys(workspace_id)
    client = redis_client()
    async with client.pipeline(transaction=False) as pipe:
        pipe.zrem(slots, call_id)
        pipe.lpush(freed, "1")
        pipe.ltrim(freed, 0, 63)
        pipe.expire(freed, 60)
        await pipe.execute()
