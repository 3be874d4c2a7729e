"""Run one server tool, and check a handler's source: both in sandbox worker processes.

``tool_execute`` runs in the parent of the sandbox workers: the Celery task process in
production, the platform's own process on the embedded default. It decrypts the
workspace's secrets here (they never travel through the broker), gives the worker only
references to them (real values only of secrets marked "readable by code", and only to a
handler an owner or admin saved), serves the worker's fetches through the egress proxy,
and scrubs the outcome.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections import OrderedDict
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db.models import Count, Max

from core import outbound
from egress import client as egress
from egress.secret_refs import SecretBinding, make_reference, mask_secret_values
from engine.protocol import ToolStatus
from engine.tools.call import ToolRequest, ToolResult
from secrets_app.models import Secret
from secrets_app.services import secret_resolve
from tools_app import pool
from tools_app.calls import SandboxLimits, SandboxResult

CALLS_POOL = "calls"
CHECKS_POOL = "checks"
CHECK_TIMEOUT_S = 10.0


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
        guard=outbound.policy(),
        max_response_bytes=settings.SANDBOX_FETCH_MAX_BYTES,
        timeout_s=settings.SANDBOX_FETCH_TIMEOUT_S,
    )


def _limits(run: ToolRequest) -> SandboxLimits:
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
) -> ToolResult:
    if result.ok:
        status = ToolStatus.COMPLETED
    else:
        status = ToolStatus.TIMED_OUT if result.timed_out else ToolStatus.FAILED
    return ToolResult(
        status=status,
        result=scrub(result.result_json, bindings) if result.ok else None,
        error=None if result.ok else scrub(result.error, bindings),
        log=scrub(result.console, bindings) or None,
        cpu_ms=result.cpu_ms,
        masked_arguments=scrub(json.dumps(arguments, ensure_ascii=False), bindings),
    )


def _visible(binding: SecretBinding, run: ToolRequest) -> str:
    return binding.value if run.reads_secrets and binding.readable_by_code else binding.reference


async def _run_in_pool(run: ToolRequest, bindings: list[SecretBinding]) -> SandboxResult:
    calls = pool.pool(CALLS_POOL, calls_pool_config())
    return await calls.run(
        run.workspace_id,
        source=run.handler,
        args_json=json.dumps(run.arguments),
        secrets_json=json.dumps({b.name: _visible(b, run) for b in bindings}),
        limits=_limits(run),
        fetcher=_fetcher(bindings, _policy()),
    )


# The secrets being read for each workspace: concurrent calls of one workspace share one
# read, so a workspace's flood of calls makes one query at a time, not a queue of them.
_loading: dict[tuple[asyncio.AbstractEventLoop, int], asyncio.Task[list[SecretBinding]]] = {}


async def _workspace_bindings(workspace_id: int) -> list[SecretBinding]:
    key = (asyncio.get_running_loop(), workspace_id)
    task = _loading.get(key)
    if task is None:
        # Not on the thread every database read of the process queues on (sessions'
        # reads, handshakes): another workspace's calls must not wait behind them.
        read = database_sync_to_async(secret_bindings, thread_sensitive=False)
        task = asyncio.ensure_future(read(workspace_id=workspace_id))
        _loading[key] = task
        task.add_done_callback(lambda _: _loading.pop(key, None))
    return list(await asyncio.shield(task))


async def tool_execute(run: ToolRequest) -> ToolResult:
    """Run a handler in a sandbox worker of this process; from any event loop."""
    bindings = await _workspace_bindings(run.workspace_id)
    return await pool.run_on_pool_loop(tool_execute_with(run, bindings))


async def tool_execute_with(run: ToolRequest, bindings: list[SecretBinding]) -> ToolResult:
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
