"""Rate limits that hold across web processes: counted in Redis in production, else in
this process's memory (the embedded default runs one process).

Built on the ``limits`` library with moving windows (exact counts, so ``Retry-After`` is
right to the second). Every limit is a ``Rate`` named in settings and in
docs/limits.md; callers ask ``hit`` (count this event) or ``peek`` (would one more pass?)
and get back ``None`` (allowed) or the seconds to wait.

When Redis is unreachable ``hit`` raises (``StorageError``): a new WebSocket is refused with
4503 like the session limit does, a running session is let through. ``hit_sync`` and
``peek_sync`` (the HTTP side) let requests through and log it, so an outage never locks
every user out of the dashboard.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from limits import RateLimitItemPerSecond
from limits import storage as sync_storage
from limits import strategies as sync_strategies
from limits.aio import storage as async_storage
from limits.aio import strategies as async_strategies
from limits.errors import StorageError
from limits.storage import storage_from_string

from core import backends

logger = logging.getLogger(__name__)

KEY_PREFIX = "voice-limits"


@dataclass(frozen=True)
class Rate:
    """``amount`` events per ``per_s`` seconds for each distinct set of identifiers."""

    name: str
    amount: int
    per_s: int

    def item(self) -> RateLimitItemPerSecond:
        return RateLimitItemPerSecond(self.amount, self.per_s, namespace=self.name)


# One limiter per event loop (an async client belongs to its loop), and one for threads.
_async_limiters: dict[Any, async_strategies.MovingWindowRateLimiter] = {}
_sync_limiter: sync_strategies.MovingWindowRateLimiter | None = None
_sync_lock = threading.Lock()


def _async_limiter() -> async_strategies.MovingWindowRateLimiter:
    loop = asyncio.get_running_loop()
    limiter = _async_limiters.get(loop)
    if limiter is None:
        store: Any
        uri = backends.rate_storage_uri(asynchronous=True)
        if uri is not None:  # one Redis, or a Redis Cluster (``async+redis+cluster://``)
            store = storage_from_string(
                uri, implementation="redispy", key_prefix=KEY_PREFIX, wrap_exceptions=True
            )
        else:
            store = async_storage.MemoryStorage()
        limiter = _async_limiters[loop] = async_strategies.MovingWindowRateLimiter(store)
    return limiter


def _sync() -> sync_strategies.MovingWindowRateLimiter:
    global _sync_limiter
    with _sync_lock:
        if _sync_limiter is None:
            store: Any
            uri = backends.rate_storage_uri(asynchronous=False)
            if uri is not None:
                store = storage_from_string(uri, key_prefix=KEY_PREFIX, wrap_exceptions=True)
            else:
                store = sync_storage.MemoryStorage()
            _sync_limiter = sync_strategies.MovingWindowRateLimiter(store)
        return _sync_limiter


def _wait_s(reset_time: float) -> int:
    return max(1, math.ceil(reset_time - time.time()))


async def hit(rate: Rate, *identifiers: str) -> int | None:
    """Count one event. None: allowed; else the whole seconds until one more would be."""
    limiter = _async_limiter()
    if await limiter.hit(rate.item(), *identifiers):
        return None
    stats = await limiter.get_window_stats(rate.item(), *identifiers)
    return _wait_s(stats.reset_time)


def hit_sync(rate: Rate, *identifiers: str) -> int | None:
    """``hit`` for synchronous code (views); lets the event through if Redis is down."""
    try:
        limiter = _sync()
        if limiter.hit(rate.item(), *identifiers):
            return None
        return _wait_s(limiter.get_window_stats(rate.item(), *identifiers).reset_time)
    except StorageError as exc:
        logger.warning("rate limit %s not checked: %s", rate.name, type(exc).__name__)
        return None


def peek_sync(rate: Rate, *identifiers: str) -> int | None:
    """Whether one more event would pass, without counting it (None) or how long to wait."""
    try:
        limiter = _sync()
        if limiter.test(rate.item(), *identifiers):
            return None
        return _wait_s(limiter.get_window_stats(rate.item(), *identifiers).reset_time)
    except StorageError as exc:
        logger.warning("rate limit %s not checked: %s", rate.name, type(exc).__name__)
        return None


def reset() -> None:
    """Forget every count (tests): memory counters, or our keys in Redis."""
    global _sync_limiter
    with _sync_lock:
        _sync_limiter = None
    _async_limiters.clear()
    if backends.production():
        with backends.redis_sync(backends.COUNTERS) as client:
            for key in list(client.scan_iter(f"{KEY_PREFIX}*")):
                client.delete(key)


__all__ = ["Rate", "StorageError", "hit", "hit_sync", "peek_sync", "reset"]
