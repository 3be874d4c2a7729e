from __future__ import annotations

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
