from __future__ import annotations

import asyncio

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
