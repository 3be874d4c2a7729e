"""/healthz: is the database reachable, Redis when one is configured, and can this process
start a sandbox worker (with the protections it reports, as this host allows them), and
did the offline speech models this process uses load (``speech_models``: each one's status).

/healthz is public (load balancers call it without a key), so the checks that reach other
services run at most once every ``HEALTHZ_CACHE_S`` per process, whatever the request
rate: a flood of it costs the database and each Redis one check a second, and requests that
arrive during a check wait for that one check instead of starting their own. The speech
models' status is read on every request (it is this process's memory)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import redis
from django.conf import settings
from django.core.signals import setting_changed
from django.db import connection
from django.http import HttpRequest, JsonResponse

from core import backends
from engine.providers.audio import offline_models_status
from realtime import drain
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
    """Every Redis a shared role uses (core/backends.py) answers."""
    if not backends.production():
        return "not configured"
    for role, url in backends.role_urls().items():
        try:
            with backends.redis_sync_at(url, socket_timeout=2, socket_connect_timeout=2) as client:
                client.ping()
        except redis.RedisError as exc:
            logger.warning("healthz: redis (%s) check failed: %s", role, type(exc).__name__)
            return "down"
    return "ok"


def _run_checks() -> dict[str, object]:
    """What this process reaches: the database, each Redis, a sandbox worker."""
    checks: dict[str, object] = {"db": _database_status(), "redis": _redis_status()}
    protections = sandbox_protections()
    checks["sandbox"] = "ok" if protections is not None else "down"
    checks["sandbox_protections"] = protections or {}
    return checks


_lock = threading.Lock()
_last: tuple[float, dict[str, object]] | None = None  # checked at, checks


def _checks() -> dict[str, object]:
    """The latest checks, run again once they are ``HEALTHZ_CACHE_S`` old (one at a time)."""
    global _last
    with _lock:
        if _last is None or time.monotonic() - _last[0] >= settings.HEALTHZ_CACHE_S:
            checks = _run_checks()
            # Stamped when it ends: those who waited for it share it, however long it
            # took (stamped at its start, a check slower than the cache, as one that waits
            # out Redis timeouts, was stale for each of them, and each ran its own).
            _last = (time.monotonic(), checks)
        return dict(_last[1])


def _forget(**kwargs: Any) -> None:
    """A changed setting (tests) may change what the checks find."""
    global _last
    with _lock:
        _last = None


setting_changed.connect(_forget, dispatch_uid="platform_site.health")


def healthz(request: HttpRequest) -> JsonResponse:
    if drain.draining():  # a deploy stops this process: balancers send new sessions elsewhere
        response = JsonResponse({"draining": True}, status=503)
        response._has_been_logged = True  # type: ignore[attr-defined]  # expected, not an error
        return response
    checks = _checks()
    # The speech models' status is this process's memory (and asking it is what loads a
    # failed model again once its pause is over): read on every request.
    models = offline_models_status()
    checks["speech"] = "down" if "failed" in models.values() else "ok"
    checks["speech_models"] = models
    verdicts = (checks[name] for name in ("db", "redis", "sandbox", "speech"))
    healthy = all(value in {"ok", "not configured"} for value in verdicts)
    return JsonResponse(checks, status=200 if healthy else 503)
