from __future__ import annotations

import asyncio
import time

import pytest


def test_healthz_without_redis(client, db, settings):
    settings.REDIS_URL = None
    response = client.get("/healthz")
    assert response.status_code == 200
    checks = response.json()
    assert {k: checks[k] for k in ("db", "redis", "sandbox")} == {
        "db": "ok",
        "redis": "not configured",
        "sandbox": "ok",
    }


@pytest.mark.redis
def test_healthz_with_real_redis(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    checks = response.json()
    assert {k: checks[k] for k in ("db", "redis", "sandbox")} == {
        "db": "ok",
        "redis": "ok",
        "sandbox": "ok",
    }


def test_healthz_is_503_when_redis_is_down(client, db, settings, unused_tcp_port):
    settings.REDIS_URL = f"redis://127.0.0.1:{unused_tcp_port}/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["redis"] == "down"


def test_openapi_schema_and_docs_are_served(client, db):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/secrets" in schema.content
    assert client.get("/api/docs/").status_code == 200


async def test_a_warm_asked_while_the_first_worker_starts_waits_for_it() -> None:
    """daphne warms the sandbox as it starts, and the first /healthz warms it again: the
    second waits for the worker the first is starting. (It returned at once, /healthz
    answered 503 and Django logged "ERROR Service Unavailable: /healthz" on every start.)"""
    from django.conf import settings

    from tools_app import pool

    config = pool.PoolConfig(size=1, per_lane=1, memory_bytes=settings.SANDBOX_WORKER_MEMORY_BYTES)

    async def race() -> object:
        sandbox = pool.pool("warm-race", config)
        first = asyncio.ensure_future(sandbox.warm())
        await asyncio.sleep(0)  # the first has begun starting its worker
        await sandbox.warm()
        seen = sandbox.protections
        await first
        sandbox.close()
        return seen

    assert await pool.run_on_pool_loop(race()) is not None


def test_a_flood_of_healthz_checks_the_database_once_a_second(client, db, settings):
    """/healthz is public: a script that calls it as fast as it can must not turn each call
    into a database query and a ping of every Redis (they ran on every request)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.HEALTHZ_CACHE_S = 60.0
    with CaptureQueriesContext(connection) as queries:
        answers = [client.get("/healthz") for _ in range(20)]
    assert {answer.status_code for answer in answers} == {200}
    assert len({answer.content for answer in answers}) == 1
    assert [query["sql"] for query in queries].count("SELECT 1") == 1

    settings.HEALTHZ_CACHE_S = 0.0  # a check that is due runs again
    with CaptureQueriesContext(connection) as queries:
        client.get("/healthz")
        client.get("/healthz")
    assert [query["sql"] for query in queries].count("SELECT 1") == 2


def _checks_of_requests_at_once(monkeypatch, requests: int, check_s: float) -> list[int]:
    """``requests`` /healthz requests at once while the database check takes ``check_s``:
    how many checks ran (the answers all 200)."""
    import threading

    from django.db import connections
    from django.test import RequestFactory

    from platform_site import health

    checked = []
    real = health._database_status

    def slow_database_status() -> str:
        checked.append(1)
        time.sleep(check_s)  # a slow database: every request arrives during the check
        return real()

    monkeypatch.setattr(health, "_database_status", slow_database_status)
    answers: list[int] = []
    barrier = threading.Barrier(requests)

    def ask() -> None:
        barrier.wait()
        try:
            answers.append(health.healthz(RequestFactory().get("/healthz")).status_code)
        finally:
            connections.close_all()  # this thread's own connection

    threads = [threading.Thread(target=ask) for _ in range(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert answers == [200] * requests
    return checked


def test_simultaneous_healthz_requests_share_one_check(db, settings, monkeypatch):
    """Requests that arrive while a check runs wait for it and answer with what it found."""
    settings.HEALTHZ_CACHE_S = 60.0
    assert len(_checks_of_requests_at_once(monkeypatch, 16, check_s=0.3)) == 1


def test_a_check_slower_than_the_cache_is_still_shared(db, settings, monkeypatch):
    """A check that takes longer than HEALTHZ_CACHE_S (a Redis that does not answer: 2 s
    of timeout per role) was stamped with its start: each request that had waited for it
    found it already stale and ran its own, one after the other (a flood while Redis is
    down, the moment it matters, cost a check, and its timeouts, per request)."""
    settings.HEALTHZ_CACHE_S = 1.0  # the default
    started = time.monotonic()
    assert len(_checks_of_requests_at_once(monkeypatch, 4, check_s=1.3)) == 1
    assert time.monotonic() - started < 2.5
