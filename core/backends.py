"""The one switch between the embedded platform and production: ``REDIS_URL``.

Embedded (unset, one process): the channel layer, session leases, resume state and rate
counts live in this process's memory; Celery tasks run in the calling process (eager)
and mail goes out on a thread. Production (set): all of them in Redis, tasks and mail on
Celery workers, so any web process may serve, resume or end any session.

Each shared role may have a server (or a cluster) of its own; each falls back to
``REDIS_URL`` (docs/configuration.md, "Shared services"):

- ``CHANNEL_LAYER_URL``: the channel layer; several URLs, comma-separated, are shards
  (channels-redis spreads channels and groups over them);
- ``SESSION_STATE_URL``: the resume store and the session leases (``SESSIONS``);
- ``COUNTERS_URL``: rate limits, quota counters, the sandbox's fairness slots and the
  webhooks' in-flight slots and parked deliveries (``COUNTERS``);
- ``CELERY_BROKER_URL`` (Redis or RabbitMQ, ``amqp://``) and ``CELERY_RESULT_BACKEND``.

``SESSION_STATE_URL`` and ``COUNTERS_URL`` may name a Redis Cluster,
``redis+cluster://host:port[,host:port…]`` (redis-py's cluster client): every key a
script or a transaction touches together shares a hash tag (a session's id, a
workspace's id), so it works in one slot.

``settings.py`` derives CHANNEL_LAYERS and the Celery and mail settings with the first
functions here (plain values: settings import no app code); the rest of the code asks
the others which backend to use, never a URL itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal
from urllib.parse import urlparse

import redis
import redis.asyncio as aioredis
from django.conf import settings
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import ClusterNode, RedisCluster

REDIS_CONNECTIONS_PER_LOOP = 100
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")

Role = Literal["sessions", "counters"]
SESSIONS: Role = "sessions"  # resume store, session leases
COUNTERS: Role = "counters"  # rates, quotas, fairness slots, webhook slots
_ROLE_SETTINGS = {SESSIONS: "SESSION_STATE_URL", COUNTERS: "COUNTERS_URL"}

# ---------------------------------------------------------------- read by settings.py


def channel_layers(url: str | None) -> dict[str, Any]:
    """``url``: one Redis, or several comma-separated (shards)."""
    if not url:
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    hosts = [host.strip() for host in url.split(",") if host.strip()]
    return {
        "default": {
            "BACKEND": "platform_site.channel_layer.ResilientRedisChannelLayer",
            "CONFIG": {"hosts": hosts, "capacity": 1000, "expiry": 30},
        }
    }


def celery_broker(broker_url: str | None, redis_url: str | None) -> str:
    return broker_url or redis_url or "memory://"


def is_cluster(url: str) -> bool:
    return urlparse(url).scheme in CLUSTER_SCHEMES


def cluster_nodes(url: str) -> list[tuple[str, int]]:
    """The start-up nodes of ``redis+cluster://h1:p1,h2:p2``."""
    netloc = urlparse(url).netloc.rsplit("@", 1)[-1]
    nodes = []
    for node in netloc.split(","):
        host, _, port = node.strip().rpartition(":")
        nodes.append((host or "127.0.0.1", int(port or 6379)))
    return nodes


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


def role_url(role: Role) -> str:
    """Where ``role`` keeps its keys: its own setting, else ``REDIS_URL``."""
    url = getattr(settings, _ROLE_SETTINGS[role], None) or settings.REDIS_URL
    assert url, "only called with a Redis server configured"
    return str(url)


def role_urls() -> dict[str, str]:
    """Every Redis the shared roles use, by role (health checks)."""
    urls: dict[str, str] = {role: role_url(role) for role in _ROLE_SETTINGS}
    for n, url in enumerate(str(settings.CHANNEL_LAYER_URL or settings.REDIS_URL).split(",")):
        urls[f"channel_layer_{n}"] = url.strip()
    return urls


_clients: dict[tuple[Any, str], aioredis.Redis] = {}


def redis_client(role: Role = SESSIONS) -> aioredis.Redis:
    """This event loop's client for ``role`` (a client is bound to its loop): a Redis, or
    a ``RedisCluster`` (same commands; keys used together share a hash tag)."""
    loop = asyncio.get_running_loop()
    url = role_url(role)
    if (loop, url) not in _clients:
        client: aioredis.Redis
        if is_cluster(url):
            # Typed as a Redis: the commands, scripts and pipelines used here are the same.
            client = AsyncRedisCluster(  # type: ignore[assignment]
                startup_nodes=[AsyncClusterNode(h, p) for h, p in cluster_nodes(url)],
                max_connections=REDIS_CONNECTIONS_PER_LOOP,
                ssl=urlparse(url).scheme == "rediss+cluster",
            )
        else:
            # A burst beyond the pool's connections waits for one (up to 10 s) instead of
            # failing at once, which redis-py's default pool does.
            pool = aioredis.BlockingConnectionPool.from_url(
                url, max_connections=REDIS_CONNECTIONS_PER_LOOP, timeout=10
            )
            client = aioredis.Redis(connection_pool=pool)
        _clients[(loop, url)] = client
    return _clients[(loop, url)]


@contextmanager
def redis_sync(role: Role = SESSIONS, **options: Any) -> Iterator[redis.Redis]:
    """A short-lived client for synchronous code (views, commands, health checks)."""
    with redis_sync_at(role_url(role), **options) as client:
        yield client


@contextmanager
def redis_sync_at(url: str, **options: Any) -> Iterator[redis.Redis]:
    client: Any
    if is_cluster(url):
        nodes = [ClusterNode(h, p) for h, p in cluster_nodes(url)]  # type: ignore[no-untyped-call]
        client = RedisCluster(
            startup_nodes=nodes, ssl=urlparse(url).scheme == "rediss+cluster", **options
        )
    else:
        client = redis.Redis.from_url(url, **options)
    try:
        yield client
    finally:
        client.close()


def rate_storage_uri(*, asynchronous: bool) -> str | None:
    """The ``limits`` library's storage for the rate limits; None: this process's memory.
    (``limits`` reads ``redis+cluster://`` itself.)"""
    if not production():
        return None
    url = role_url(COUNTERS)
    if url.startswith("unix://"):
        url = "redis+unix://" + url.removeprefix("unix://")
    return f"async+{url}" if asynchronous else url
