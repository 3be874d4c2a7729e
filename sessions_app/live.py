"""How many sessions each workspace has open, across every web process.

With Redis: a sorted set per workspace (member = session id, score = lease expiry),
refreshed by each live session; a crashed process's sessions expire with their lease.
Without Redis (embedded, one process): the same in memory.

A session keeps its lease while it waits for ``resume`` after an unclean disconnect (it
still holds its state and may still be running a turn); the process that resumes it
``adopt``s the same lease, so a resumed session never counts twice.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import redis.asyncio as aioredis
from django.conf import settings

LEASE_S = 90.0

# Atomically: drop expired leases, refuse past the limit, else add this session.
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""

_memory: dict[int, dict[str, float]] = {}
_clients: dict[Any, aioredis.Redis] = {}


def redis_client() -> aioredis.Redis:
    """This event loop's client for ``settings.REDIS_URL`` (a client is bound to its loop)."""
    loop = asyncio.get_running_loop()
    if loop not in _clients:
        _clients[loop] = aioredis.Redis.from_url(settings.REDIS_URL)
    return _clients[loop]


_client = redis_client


def _key(workspace_id: int) -> str:
    return f"voice:live:{workspace_id}"


async def acquire(*, workspace_id: int, session_id: str, limit: int) -> bool:
    now = time.time()
    if not settings.REDIS_URL:
        leases = _memory.setdefault(workspace_id, {})
        for sid in [sid for sid, expiry in leases.items() if expiry <= now]:
            del leases[sid]
        if len(leases) >= limit:
            return False
        leases[session_id] = now + LEASE_S
        return True
    return await lease_take(_key(workspace_id), session_id, limit=limit, hold_s=LEASE_S)


async def lease_take(key: str, member: str, *, limit: int, hold_s: float) -> bool:
    """Add ``member`` to the leases in ``key`` for ``hold_s`` seconds, unless ``limit``
    unexpired leases are already there (Redis, atomically; shared by every process)."""
    now = time.time()
    granted = await redis_client().eval(
        _ACQUIRE, 1, key, now, now + hold_s, limit, member, int(hold_s * 2) + 60
    )
    return bool(granted)


async def renew(*, workspace_id: int, session_id: str) -> None:
    expiry = time.time() + LEASE_S
    if not settings.REDIS_URL:
        _memory.setdefault(workspace_id, {})[session_id] = expiry
        return
    await redis_client().zadd(_key(workspace_id), {session_id: expiry}, xx=True)


async def adopt(*, workspace_id: int, session_id: str) -> None:
    """Take over the lease of a session resumed from another process, without a limit check:
    it has counted all along (only a lease that already expired is added back)."""
    expiry = time.time() + LEASE_S
    if not settings.REDIS_URL:
        _memory.setdefault(workspace_id, {})[session_id] = expiry
        return
    client = redis_client()
    await client.zadd(_key(workspace_id), {session_id: expiry})
    await client.expire(_key(workspace_id), int(LEASE_S * 2))


async def release(*, workspace_id: int, session_id: str) -> None:
    if not settings.REDIS_URL:
        _memory.get(workspace_id, {}).pop(session_id, None)
        return
    await redis_client().zrem(_key(workspace_id), session_id)


async def count(*, workspace_id: int) -> int:
    now = time.time()
    if not settings.REDIS_URL:
        return sum(1 for expiry in _memory.get(workspace_id, {}).values() if expiry > now)
    return int(await redis_client().zcount(_key(workspace_id), now, "+inf"))
