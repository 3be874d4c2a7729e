"""How many sessions each workspace (and each key from each client address) has open,
across every web process.

With Redis: a sorted set per pool (member = session id, score = lease expiry),
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
REDIS_CONNECTIONS_PER_LOOP = 100

# Atomically: drop expired leases, refuse past the limit, else add this session.
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""

_memory: dict[str, dict[str, float]] = {}
_clients: dict[Any, aioredis.Redis] = {}


def redis_client() -> aioredis.Redis:
    """This event loop's client for ``settings.REDIS_URL`` (a client is bound to its loop)."""
    loop = asyncio.get_running_loop()
    if loop not in _clients:
        # A burst beyond the pool's connections waits for one (up to 10 s) instead of
        # failing at once, which redis-py's default pool does.
        assert settings.REDIS_URL, "only called with a Redis server configured"
        pool = aioredis.BlockingConnectionPool.from_url(
            settings.REDIS_URL, max_connections=REDIS_CONNECTIONS_PER_LOOP, timeout=10
        )
        _clients[loop] = aioredis.Redis(connection_pool=pool)
    return _clients[loop]


_client = redis_client


def workspace_pool(workspace_id: int) -> str:
    """The leases that count toward a workspace's session limit."""
    return f"voice:live:{workspace_id}"


def address_pool(key_id: int, address: str) -> str:
    """The leases of one key's sessions from one client address (so one client can never
    take the whole workspace limit)."""
    return f"voice:live:key:{key_id}:{address}"


async def acquire(*, pool: str, session_id: str, limit: int) -> bool:
    now = time.time()
    if not settings.REDIS_URL:
        leases = _memory.setdefault(pool, {})
        for sid in [sid for sid, expiry in leases.items() if expiry <= now]:
            del leases[sid]
        if len(leases) >= limit:
            return False
        leases[session_id] = now + LEASE_S
        return True
    return await lease_take(pool, session_id, limit=limit, hold_s=LEASE_S)


async def lease_take(key: str, member: str, *, limit: int, hold_s: float) -> bool:
    """Add ``member`` to the leases in ``key`` for ``hold_s`` seconds, unless ``limit``
    unexpired leases are already there (Redis, atomically; shared by every process)."""
    now = time.time()
    granted = await redis_client().eval(
        _ACQUIRE, 1, key, now, now + hold_s, limit, member, int(hold_s * 2) + 60
    )
    return bool(granted)


async def renew(*, pool: str, session_id: str) -> None:
    expiry = time.time() + LEASE_S
    if not settings.REDIS_URL:
        _memory.setdefault(pool, {})[session_id] = expiry
        return
    client = redis_client()
    await client.zadd(pool, {session_id: expiry}, xx=True)
    await client.expire(pool, int(LEASE_S * 2))


async def adopt(*, pool: str, session_id: str) -> None:
    """Take over the lease of a session resumed from another process, without a limit check:
    it has counted all along (only a lease that already expired is added back)."""
    expiry = time.time() + LEASE_S
    if not settings.REDIS_URL:
        _memory.setdefault(pool, {})[session_id] = expiry
        return
    client = redis_client()
    await client.zadd(pool, {session_id: expiry})
    await client.expire(pool, int(LEASE_S * 2))


async def release(*, pool: str, session_id: str) -> None:
    if not settings.REDIS_URL:
        _memory.get(pool, {}).pop(session_id, None)
        return
    await redis_client().zrem(pool, session_id)


async def count(*, pool: str) -> int:
    now = time.time()
    if not settings.REDIS_URL:
        return sum(1 for expiry in _memory.get(pool, {}).values() if expiry > now)
    return int(await redis_client().zcount(pool, now, "+inf"))


async def holders(*, pool: str) -> set[str]:
    """The session ids whose lease in ``pool`` has not lapsed."""
    now = time.time()
    if not settings.REDIS_URL:
        return {sid for sid, expiry in _memory.get(pool, {}).items() if expiry > now}
    members = await redis_client().zrangebyscore(pool, now, "+inf")
    return {member.decode() if isinstance(member, bytes) else str(member) for member in members}


def holders_sync(*, pool: str) -> set[str]:
    """``holders`` for synchronous code (views, commands): a short-lived client of its own."""
    now = time.time()
    if not settings.REDIS_URL:
        return {sid for sid, expiry in _memory.get(pool, {}).items() if expiry > now}
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        members = client.zrangebyscore(pool, now, "+inf")
    finally:
        client.close()
    return {member.decode() if isinstance(member, bytes) else str(member) for member in members}
