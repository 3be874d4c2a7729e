"""The one switch between the embedded platform and production: ``REDIS_URL``.

Embedded (unset, one process): the channel layer, session leases, resume state and rate
counts live in this process's memory; Celery tasks run in the calling process (eager)
and mail goes out on a thread. Production (set): all of them in Redis, tasks and mail on
Celery workers, so any web process may serve, resume or end any session.

``settings.py`` derives CHANNEL_LAYERS and the Celery and mail settings with the first
functions here (plain values: settings import no app code); the rest of the code asks
the others which backend to use, never ``REDIS_URL`` itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import redis
import redis.asyncio as aioredis
from django.conf import settings

if TYPE_CHECKING:
    from sessions_app.live import LeaseStore
    from sessions_app.resume.store import ResumeStore

REDIS_CONNECTIONS_PER_LOOP = 100

# ---------------------------------------------------------------- read by settings.py


def channel_layers(redis_url: str | None) -> dict[str, Any]:
    if not redis_url:
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    return {
        "default": {
            "BACKEND": "platform_site.channel_layer.ResilientRedisChannelLayer",
            "CONFIG": {"hosts": [redis_url], "capacity": 1000, "expiry": 30},
        }
    }


def celery_broker(redis_url: str | None) -> str:
    return redis_url or "memory://"


def tasks_inline_by_default(redis_url: str | None) -> bool:
    """Without a broker, Celery tasks run in the calling process."""
    return redis_url is None


def mail_queue(redis_url: str | None) -> str:
    return "celery" if redis_url else "thread"


# ---------------------------------------------------------------- asked at run time


def production() -> bool:
    """Redis holds what several processes share (leases, resume state, rate counts)."""
    return bool(settings.REDIS_URL)


def tasks_inline() -> bool:
    """Tool calls and webhook deliveries run in this process (no Celery worker)."""
    return bool(settings.CELERY_TASK_ALWAYS_EAGER)


def mail_on_celery() -> bool:
    return bool(settings.MAIL_QUEUE == "celery")


_clients: dict[Any, aioredis.Redis] = {}


def redis_client() -> aioredis.Redis:
    """This event loop's client for ``REDIS_URL`` (a client is bound to its loop)."""
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


@contextmanager
def redis_sync(**options: Any) -> Iterator[redis.Redis]:
    """A short-lived client for synchronous code (views, commands, health checks)."""
    assert settings.REDIS_URL, "only called with a Redis server configured"
    client = redis.Redis.from_url(settings.REDIS_URL, **options)
    try:
        yield client
    finally:
        client.close()


def session_leases() -> LeaseStore:
    """Where the session limits count open sessions."""
    from sessions_app import live

    return live.REDIS_LEASES if production() else live.MEMORY_LEASES


def resume_store() -> ResumeStore:
    """Where a resumable session keeps its state (any web process may resume it)."""
    from sessions_app.resume import store

    return store.REDIS_STORE if production() else store.MEMORY_STORE


def rate_storage_uri(*, asynchronous: bool) -> str | None:
    """The ``limits`` library's storage for the rate limits; None: this process's memory."""
    if not production():
        return None
    url = str(settings.REDIS_URL)
    if url.startswith("unix://"):
        url = "redis+unix://" + url.removeprefix("unix://")
    return f"async+{url}" if asynchronous else url
