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

import time
from collections.abc import Iterable
from typing import Any, Protocol

from core import backends

LEASE_S = 90.0

# Atomically: drop expired leases, refuse past the limit, else add this session.
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""

# Kept here for the modules (and tests) that reach Redis through this one.
redis_client = backends.redis_client


def workspace_pool(workspace_id: int) -> str:
    """The leases that count toward a workspace's session limit (one key: any cluster slot)."""
    return f"voice:live:{workspace_id}"


def address_pool(key_id: int, address: str) -> str:
    """The leases of one key's sessions from one client address (so one client can never
    take the whole workspace limit)."""
    return f"voice:live:key:{key_id}:{address}"


class LeaseStore(Protocol):
    async def acquire(self, pool: str, session_id: str, limit: int) -> bool: ...
    async def put(self, pool: str, session_id: str, *, only_held: bool) -> None: ...
    async def release(self, pool: str, session_id: str) -> None: ...
    async def count(self, pool: str) -> int: ...
    async def holders(self, pool: str) -> set[str]: ...
    def holders_sync(self, pool: str) -> set[str]: ...


_memory: dict[str, dict[str, float]] = {}


class MemoryLeases:
    """The embedded platform's leases: one process, so its memory (``_memory``)."""

    async def acquire(self, pool: str, session_id: str, limit: int) -> bool:
        now = time.time()
        leases = _memory.setdefault(pool, {})
        for sid in [sid for sid, expiry in leases.items() if expiry <= now]:
            del leases[sid]
        if len(leases) >= limit:
            return False
        leases[session_id] = now + LEASE_S
        return True

    async def put(self, pool: str, session_id: str, *, only_held: bool) -> None:
        _memory.setdefault(pool, {})[session_id] = time.time() + LEASE_S

    async def release(self, pool: str, session_id: str) -> None:
        _memory.get(pool, {}).pop(session_id, None)

    async def count(self, pool: str) -> int:
        now = time.time()
        return sum(1 for expiry in _memory.get(pool, {}).values() if expiry > now)

    async def holders(self, pool: str) -> set[str]:
        return self.holders_sync(pool)

    def holders_sync(self, pool: str) -> set[str]:
        now = time.time()
        return {sid for sid, expiry in _memory.get(pool, {}).items() if expiry > now}


class RedisLeases:
    """Production's leases: a sorted set per pool, shared by every web process."""

    async def acquire(self, pool: str, session_id: str, limit: int) -> bool:
        return await lease_take(pool, session_id, limit=limit, hold_s=LEASE_S)

    async def put(self, pool: str, session_id: str, *, only_held: bool) -> None:
        async with redis_client().pipeline(transaction=False) as pipe:  # one round trip
            pipe.zadd(pool, {session_id: time.time() + LEASE_S}, xx=only_held)
            pipe.expire(pool, int(LEASE_S * 2))
            await pipe.execute()

    async def release(self, pool: str, session_id: str) -> None:
        await redis_client().zrem(pool, session_id)

    async def count(self, pool: str) -> int:
        return int(await redis_client().zcount(pool, time.time(), "+inf"))

    async def holders(self, pool: str) -> set[str]:
        return _decoded(await redis_client().zrangebyscore(pool, time.time(), "+inf"))

    def holders_sync(self, pool: str) -> set[str]:
        with backends.redis_sync() as client:
            return _decoded(client.zrangebyscore(pool, time.time(), "+inf"))


def _decoded(members: Iterable[Any]) -> set[str]:
    return {member.decode() if isinstance(member, bytes) else member for member in members}


MEMORY_LEASES = MemoryLeases()
REDIS_LEASES = RedisLeases()


async def lease_take(key: str, member: str, *, limit: int, hold_s: float) -> bool:
    """Add ``member`` to the leases in ``key`` for ``hold_s`` seconds, unless ``limit``
    unexpired leases are already there (Redis, atomically; shared by every process)."""
    now = time.time()
    granted = await redis_client().eval(
        _ACQUIRE, 1, key, now, now + hold_s, limit, member, int(hold_s * 2) + 60
    )
    return bool(granted)


def session_leases() -> LeaseStore:
    """Where the session limits count open sessions: Redis in production, else memory."""
    return REDIS_LEASES if backends.production() else MEMORY_LEASES


async def acquire(*, pool: str, session_id: str, limit: int) -> bool:
    return await session_leases().acquire(pool, session_id, limit)


async def renew(*, pool: str, session_id: str) -> None:
    await session_leases().put(pool, session_id, only_held=True)


async def adopt(*, pool: str, session_id: str) -> None:
    """Take over the lease of a session resumed from another process, without a limit check:
    it has counted all along (only a lease that already expired is added back)."""
    await session_leases().put(pool, session_id, only_held=False)


async def release(*, pool: str, session_id: str) -> None:
    await session_leases().release(pool, session_id)


async def count(*, pool: str) -> int:
    return await session_leases().count(pool)


async def holders(*, pool: str) -> set[str]:
    """The session ids whose lease in ``pool`` has not lapsed."""
    return await session_leases().holders(pool)


def holders_sync(*, pool: str) -> set[str]:
    """``holders`` for synchronous code (views, commands)."""
    return session_leases().holders_sync(pool)
