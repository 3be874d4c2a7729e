"""One switch (``REDIS_URL``) chooses every embedded-or-production backend together."""

from __future__ import annotations

from core import backends
from core import leases as live
from realtime.resume import store


def test_without_redis_everything_stays_in_this_process(settings):
    settings.REDIS_URL = None
    assert not backends.production()
    assert live.session_leases() is live.MEMORY_LEASES
    assert store.resume_store() is store.MEMORY_STORE
    assert backends.rate_storage_uri(asynchronous=True) is None
    assert backends.channel_layers(None)["default"]["BACKEND"].endswith("InMemoryChannelLayer")
    assert backends.tasks_inline_by_default(None) and backends.mail_queue(None) == "thread"


def test_with_redis_everything_shared_goes_there(settings):
    settings.REDIS_URL = "unix:///run/redis.sock"
    assert backends.production()
    assert live.session_leases() is live.REDIS_LEASES
    assert store.resume_store() is store.REDIS_STORE
    assert backends.rate_storage_uri(asynchronous=True) == "async+redis+unix:///run/redis.sock"
    layer = backends.channel_layers(settings.REDIS_URL)["default"]
    assert layer["CONFIG"]["hosts"] == [settings.REDIS_URL]
    assert not backends.tasks_inline_by_default(settings.REDIS_URL)
    assert backends.mail_queue(settings.REDIS_URL) == "celery"


def test_each_shared_role_falls_back_to_redis_url_or_takes_its_own(settings):
    settings.REDIS_URL = "redis://main:6379/0"
    settings.SESSION_STATE_URL = settings.COUNTERS_URL = settings.CHANNEL_LAYER_URL = None
    assert backends.role_url(backends.SESSIONS) == "redis://main:6379/0"
    assert backends.role_url(backends.COUNTERS) == "redis://main:6379/0"
    assert set(backends.role_urls().values()) == {"redis://main:6379/0"}

    settings.SESSION_STATE_URL = "redis+cluster://10.0.0.1:7001,10.0.0.2:7002"
    settings.COUNTERS_URL = "redis://counters:6379/0"
    settings.CHANNEL_LAYER_URL = "redis://layer-a:6379/0,redis://layer-b:6379/0"
    assert backends.is_cluster(backends.role_url(backends.SESSIONS))
    assert backends.cluster_nodes(settings.SESSION_STATE_URL) == [
        ("10.0.0.1", 7001), ("10.0.0.2", 7002)
    ]  # fmt: skip
    assert backends.rate_storage_uri(asynchronous=True) == "async+redis://counters:6379/0"
    assert sorted(backends.role_urls()) == [
        "channel_layer_0", "channel_layer_1", "counters", "sessions"
    ]  # fmt: skip
    settings.COUNTERS_URL = "redis+cluster://10.0.0.3:7003"
    assert backends.rate_storage_uri(asynchronous=False) == "redis+cluster://10.0.0.3:7003"

    layer = backends.channel_layers(settings.CHANNEL_LAYER_URL)["default"]
    assert layer["CONFIG"]["hosts"] == ["redis://layer-a:6379/0", "redis://layer-b:6379/0"]
    broker = "amqp://guest:guest@rabbit:5672/voice"
    assert backends.celery_broker(broker, settings.REDIS_URL) == broker
    assert backends.celery_broker(None, settings.REDIS_URL) == settings.REDIS_URL
    assert backends.celery_broker(None, None) == "memory://"
