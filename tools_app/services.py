"""Run one server tool: load the workspace's secrets, run the handler, scrub the outcome.

Runs in the sandbox worker (or a thread of the embedded platform). Secret values
are decrypted here and never travel through the broker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from secrets_app.models import Secret
from secrets_app.services import secret_resolve
from tools_app import egress, sandbox


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


@dataclass(frozen=True)
class ToolRunOutcome:
    status: str  # completed | failed | timed_out
    result: str | None = None
    error: str | None = None
    console: str = ""  # captured console output, scrubbed


def secret_bindings(*, workspace_id: int) -> list[egress.SecretBinding]:
    """The workspace's secrets, decrypted, as the egress proxy and ``scrub`` take them."""
    secrets = Secret.objects.filter(workspace_id=workspace_id)
    return [
        egress.SecretBinding(
            name=secret.name,
            value=secret_resolve(secret=secret),
            allowed_hosts=tuple(secret.allowed_hosts),
            reference=egress.make_reference(secret.name),
        )
        for secret in secrets
    ]


def scrub(text: str | None, bindings: list[egress.SecretBinding]) -> str | None:
    """Replace every secret value (in any encoding the proxy knows) with a marker."""
    return egress.mask_secret_values(text, bindings) if text else text


def _policy() -> egress.EgressPolicy:
    return egress.EgressPolicy(
        allow_private=settings.SANDBOX_EGRESS_ALLOW_PRIVATE,
        allowed_ports=frozenset(settings.SANDBOX_EGRESS_PORTS),
        max_response_bytes=settings.SANDBOX_FETCH_MAX_BYTES,
        timeout_s=settings.SANDBOX_FETCH_TIMEOUT_S,
    )


def _limits(timeout_s: float) -> sandbox.SandboxLimits:
    return sandbox.SandboxLimits(
        wall_time_s=min(timeout_s, settings.SANDBOX_WALL_TIME_S),
        heap_bytes=settings.SANDBOX_HEAP_BYTES,
        max_fetches=settings.SANDBOX_MAX_FETCHES,
        max_concurrent_fetches=settings.SANDBOX_MAX_CONCURRENT_FETCHES,
        max_result_bytes=settings.SANDBOX_MAX_RESULT_BYTES,
        max_console_bytes=settings.SANDBOX_MAX_CONSOLE_BYTES,
    )


def _fetcher(bindings: list[egress.SecretBinding]) -> sandbox.Fetcher:
    policy = _policy()

    async def fetch(request: dict[str, Any]) -> dict[str, Any]:
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
        return {
            "status": response.status,
            "headers": [list(pair) for pair in response.headers],
            "body": response.body.decode("utf-8", errors="replace"),
            "url": response.url,
        }

    return fetch


def _outcome(result: sandbox.SandboxResult, bindings: list[egress.SecretBinding]) -> ToolRunOutcome:
    console = scrub(result.console, bindings) or ""
    if result.ok:
        return ToolRunOutcome(
            status="completed", result=scrub(result.result_json, bindings), console=console
        )
    status = "timed_out" if result.timed_out else "failed"
    return ToolRunOutcome(status=status, error=scrub(result.error, bindings), console=console)


async def tool_execute(run: ToolRun) -> ToolRunOutcome:
    """Run a handler with the workspace's secrets: real values only for a pinned handler."""
    from asgiref.sync import sync_to_async

    bindings = await sync_to_async(secret_bindings)(workspace_id=run.workspace_id)
    visible = {b.name: b.value if run.pinned else b.reference for b in bindings}
    result = await sandbox.run_handler(
        run.handler,
        run.arguments,
        secrets=visible,
        fetcher=_fetcher(bindings),
        limits=_limits(run.timeout_s),
    )
    return _outcome(result, bindings)
