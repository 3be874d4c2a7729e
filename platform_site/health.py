"""/healthz: is the database reachable, Redis when one is configured, and can this process
start a sandbox worker (with the protections it reports, as this host allows them)."""

from __future__ import annotations

import logging

import redis
from django.db import connection
from django.http import HttpRequest, JsonResponse

from platform_site import backends
from tools_app.services import sandbox_protections

logger = logging.getLogger(__name__)


def _database_status() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:
        logger.warning("healthz: database check failed: %s", type(exc).__name__)
        return "down"
    return "ok"


def _redis_status() -> str:
    if not backends.production():
        return "not configured"
    try:
        with backends.redis_sync(socket_timeout=2, socket_connect_timeout=2) as client:
            client.ping()
    except redis.RedisError as exc:
        logger.warning("healthz: redis check failed: %s", type(exc).__name__)
        return "down"
    return "ok"


def healthz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, object] = {"db": _database_status(), "redis": _redis_status()}
    protections = sandbox_protections()
    checks["sandbox"] = "ok" if protections is not None else "down"
    healthy = all(value in {"ok", "not configured"} for value in checks.values())
    checks["sandbox_protections"] = protections or {}
    return JsonResponse(checks, status=200 if healthy else 503)
