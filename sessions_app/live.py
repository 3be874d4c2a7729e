"""How many sessions each workspace has open, across every web process.

With Redis: a sorted set per workspace (member = session id, score = lease expiry),
refreshed by each live session; a crashed process's sessions expire with their lease.
Without Redis (embedded, one process): the same in memory.
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


def _client() -> aioredis.Redis:
    loop = asyncio.get_running_loop()
    if loop not in _clients:
        _clients[loop] = aioredis.Redis.from_url(settings.REDIS_URL)
    return _clients[loop]


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
    granted = await _client().eval(
        _ACQUIRE, 1, _key(workspace_id), now, now + LEASE_S, limit, session_id, int(LEASE_S * 2)
    )
    return bool(granted)


async def renew(*, workspace_id: int, session_id: str) -> None:
    expiry = time.time() + LEASE_S
    if not settings.REDIS_URL:
        _memory.setdefault(workspace_id, {})[session_id] = expiry
        return
    await _client().zadd(_key(workspace_id), {session_id: expiry}, xx=True)


async def release(*, workspace_id: int, session_id: str) -> None:
    if not settings.REDIS_URL:
        _memory.get(workspace_id, {}).pop(session_id, None)
        return
    await _client().zrem(_key(workspace_id), session_id)


async def count(*, workspace_id: int) -> int:
    now = time.time()
    if not settings.REDIS_URL:
        return sum(1 for expiry in _memory.get(workspace_id, {}).values() if expiry > now)
    return int(await _client().zcount(_key(workspace_id), now, "+inf"))
