"""Run one server tool, and check a handler's source: both in sandbox worker processes.

``tool_execute`` runs in the parent of the sandbox workers: the Celery task process in
production, the platform's own process on the embedded default. It decrypts the
workspace's secrets here (they never travel through the broker), gives the worker only
references to them (real values only of secrets marked "readable by code", and only to a
handler an owner or admin saved), serves the worker's fetches through the egress proxy,
and scrubs the outcome.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db.models import Count, Max

from secrets_app.models import Secret
from secrets_app.services import secret_resolve
from tools_app import egress, pool
from tools_app.calls import SandboxLimits, SandboxResult
from tools_app.secret_refs import SecretBinding, make_reference, mask_secret_values

CALLS_POOL = "calls"
CHECKS_POOL = "checks"
CHECK_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ToolRun:
    """What the session asks for; plain data so it can cross the broker as JSON."""

    call_id: str
    workspace_id: int
    name: str
    handler: str
    arguments: dict[str, Any]
    timeout_s: float
    pinned: bool
    reads_secrets: bool = False  # pinned by an owner or admin: readable secrets are values


@dataclass(frozen=True)
class ToolRunOutcome:
    status: str  # completed | failed | timed_out
    result: str | None = None
    error: str | None = None
    console: str = ""  # captured console output, scrubbed
    cpu_ms: float = 0.0
    # The call's arguments as JSON text, scrubbed: with this the session's record needs
    # no secret of its own. None: not masked here (a platform error), the record masks.
    arguments: str | None = None


def secret_bindings(*, workspace_id: int) -> list[SecretBinding]:
    """The workspace's secrets, decrypted, as the egress proxy and ``scrub`` take them."""
    secrets = Secret.objects.filter(workspace_id=workspace_id)
    return [
        SecretBinding(
            name=secret.name,
            value=secret_resolve(secret=secret),
            allowed_hosts=tuple(secret.allowed_hosts),
            reference=make_reference(secret.name),
            readable_by_code=secret.readable_by_code,
        )
        for secret in secrets
    ]


def secrets_version(*, workspace_id: int) -> tuple[int, Any]:
    """Changes whenever a secret of the workspace is added, replaced or deleted; no
    value is decrypted to tell."""
    found = Secret.objects.filter(workspace_id=workspace_id).aggregate(
        count=Count("id"), updated=Max("updated_at")
    )
    return found["count"], found["updated"]


def scrub(text: str | None, bindings: list[SecretBinding]) -> str | None:
    """Replace every secret value (in every spelling the proxy knows) with a marker."""
    return mask_secret_values(text, bindings) if text else text


def calls_pool_config() -> pool.PoolConfig:
    return pool.PoolConfig(
        size=settings.SANDBOX_WORKERS,
        per_lane=settings.SANDBOX_WORKSPACE_CONCURRENCY,
        memory_bytes=settings.SANDBOX_WORKER_MEMORY_BYTES,
    )


def _checks_pool_config() -> pool.PoolConfig:
    return pool.PoolConfig(size=1, per_lane=1, memory_bytes=settings.SANDBOX_WORKER_MEMORY_BYTES)


def _policy() -> egress.EgressPolicy:
    return egress.EgressPolicy(
        allow_private=settings.SANDBOX_EGRESS_ALLOW_PRIVATE,
        allowed_ports=frozenset(settings.SANDBOX_EGRESS_PORTS),
        max_response_bytes=settings.SANDBOX_FETCH_MAX_BYTES,
        timeout_s=settings.SANDBOX_FETCH_TIMEOUT_S,
    )


def _limits(run: ToolRun) -> SandboxLimits:
    cpu = settings.SANDBOX_CPU_TIME_S if run.pinned else settings.SANDBOX_INLINE_CPU_TIME_S
    return SandboxLimits(
        wall_time_s=min(run.timeout_s, settings.SANDBOX_WALL_TIME_S),
        cpu_time_s=cpu,
        heap_bytes=settings.SANDBOX_HEAP_BYTES,
        max_fetches=settings.SANDBOX_MAX_FETCHES,
        max_concurrent_fetches=settings.SANDBOX_MAX_CONCURRENT_FETCHES,
        max_request_bytes=settings.SANDBOX_FETCH_MAX_REQUEST_BYTES,
        max_result_bytes=settings.SANDBOX_MAX_RESULT_BYTES,
        max_console_bytes=settings.SANDBOX_MAX_CONSOLE_BYTES,
    )


def _fetcher(bindings: list[SecretBinding], policy: egress.EgressPolicy) -> pool.Fetcher:
    async def fetch(request: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await egress.fetch(
                egress.FetchRequest(
                    url=request["url"],
                    method=request.get("method", "GET"),
                    headers=dict(request.get("headers") or []),
                    body=request.get("body"),
                ),
                policy=policy,
                secrets=bindings,
            )
        except egress.EgressError as exc:
            raise pool.FetchDenied(str(exc)) from None
        return {
            "status": response.status,
            "headers": [list(pair) for pair in response.headers],
            "body": base64.b64encode(response.body).decode("ascii"),
            "url": response.url,
        }

    return fetch


def _outcome(
    result: SandboxResult, bindings: list[SecretBinding], arguments: dict[str, Any]
) -> ToolRunOutcome:
    status = "completed" if result.ok else "timed_out" if result.timed_out else "failed"
    return ToolRunOutcome(
        status=status,
        result=scrub(result.result_json, bindings) if result.ok else None,
        error=None if result.ok else scrub(result.error, bindings),
        console=scrub(result.console, bindings) or "",
        cpu_ms=result.cpu_ms,
        arguments=scrub(json.dumps(arguments, ensure_ascii=False), bindings),
    )


def _visible(binding: SecretBinding, run: ToolRun) -> str:
    return binding.value if run.reads_secrets and binding.readable_by_code else binding.reference


async def _run_in_pool(run: ToolRun, bindings: list[SecretBinding]) -> SandboxResult:
    calls = pool.pool(CALLS_POOL, calls_pool_config())
    return await calls.run(
        run.workspace_id,
        source=run.handler,
        args_json=json.dumps(run.arguments),
        secrets_json=json.dumps({b.name: _visible(b, run) for b in bindings}),
        limits=_limits(run),
        fetcher=_fetcher(bindings, _policy()),
    )


async def tool_execute(run: ToolRun) -> ToolRunOutcome:
    """Run a handler in a sandbox worker of this process; from any event loop."""
    bindings = await database_sync_to_async(secret_bindings)(workspace_id=run.workspace_id)
    return await pool.run_on_pool_loop(tool_execute_with(run, bindings))


async def tool_execute_with(run: ToolRun, bindings: list[SecretBinding]) -> ToolRunOutcome:
    """Run a handler with secrets already loaded; on the pool loop."""
    return _outcome(await _run_in_pool(run, bindings), bindings, run.arguments)


# Verdicts by the source's SHA-256: a form and the service it calls check the same
# handler once, and re-saving an agent does not parse its handlers again.
_checked: OrderedDict[str, str | None] = OrderedDict()
_CHECKED_KEPT = 1024


async def _check_in_pool(source: str) -> str | None:
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
    if digest in _checked:
        return _checked[digest]
    verdict = await pool.pool(CHECKS_POOL, _checks_pool_config()).check(
        source, timeout_s=CHECK_TIMEOUT_S
    )
    if not (verdict or "").startswith(pool.CHECK_FAILED):  # a verdict, not an accident
        _checked[digest] = verdict
        while len(_checked) > _CHECKED_KEPT:
            _checked.popitem(last=False)
    return verdict


def handler_check(source: str) -> str | None:
    """None if ``source`` is one function expression, else why not (with its line).

    Parsed, never run, in a sandbox worker process (V8 never runs in this process).
    Blocks the calling thread; from async code use ``handler_check_async``.
    """
    return pool.submit(_check_in_pool(source)).result(timeout=CHECK_TIMEOUT_S + 5)


async def handler_check_async(source: str) -> str | None:
    return await pool.run_on_pool_loop(_check_in_pool(source))


def warm_sandbox(*, embedded: bool) -> None:
    """Start a worker in the background, so that the first call (embedded: tool calls
    and checks share this process) or the first agent save does not wait for one."""
    name, config = (
        (CALLS_POOL, calls_pool_config()) if embedded else (CHECKS_POOL, _checks_pool_config())
    )
    pool.submit(pool.pool_warm(name, config))


def warm_calls_pool() -> None:
    pool.submit(pool.pool_warm(CALLS_POOL, calls_pool_config()))


def sandbox_protections() -> dict[str, Any] | None:
    """What the sandbox workers of this process enforce (starts one if none has)."""
    found = pool.protections()
    if found is None:
        try:
            pool.submit(pool.pool_warm(CHECKS_POOL, _checks_pool_config())).result(timeout=30)
        except Exception:
            return None
        found = pool.protections()
    return found
