"""One switch (``REDIS_URL``) chooses every embedded-or-production backend together."""

from __future__ import annotations

from platform_site import backends
from sessions_app import live
from sessions_app.resume import store


def test_without_redis_everything_stays_in_this_process(settings):
    settings.REDIS_URL = None
    assert not backends.production()
    assert backends.session_leases() is live.MEMORY_LEASES
    assert backends.resume_store() is store.MEMORY_STORE
    assert backends.rate_storage_uri(asynchronous=True) is None
    assert backends.channel_layers(None)["default"]["BACKEND"].endswith("InMemoryChannelLayer")
    assert backends.tasks_inline_by_default(None) and backends.mail_queue(None) == "thread"


def test_with_redis_everything_shared_goes_there(settings):
    settings.REDIS_URL = "unix:///run/redis.sock"
    assert backends.production()
    assert backends.session_leases() is live.REDIS_LEASES
    assert backends.resume_store() is store.REDIS_STORE
    assert backends.rate_storage_uri(asynchronous=True) == "async+redis+unix:///run/redis.sock"
    layer = backends.channel_layers(settings.REDIS_URL)["default"]
    assert layer["CONFIG"]["hosts"] == [settings.REDIS_URL]
    assert not backends.tasks_inline_by_default(settings.REDIS_URL)
    assert backends.mail_queue(settings.REDIS_URL) == "celery"
