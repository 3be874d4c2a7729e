"""The session's ToolRunner for the sandbox.

With Redis, a call takes one of its workspace's slots (``fairness``), goes to the
`sandbox` Celery queue, and the outcome comes back on this session's channel
(``tool.result``); the session waits with its own deadline and never blocks on a result
backend. Without Redis (embedded), the same service runs the call in this process's own
pool of jailed worker processes, which schedules per workspace itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict
from typing import Any

from django.conf import settings
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from sessions_app.providers.base import ToolInvocation, ToolOutcome, ToolRunner
from tools_app import fairness, tasks
from tools_app.services import ToolRun, tool_execute

DEADLINE_MARGIN_S = 2.0  # queueing and the trip back, on top of the handler's own limit
UNAVAILABLE = "the tool service is unavailable right now (try again in a moment)"
BUSY = "this workspace's other tool calls kept every sandbox slot busy; try again"

logger = logging.getLogger(__name__)


class SandboxToolRunner(ToolRunner):
    def __init__(self, *, reply_channel: str = "") -> None:
        self._reply_channel = reply_channel
        self._pending: dict[str, asyncio.Future[ToolOutcome]] = {}

    async def run(self, invocation: ToolInvocation) -> ToolOutcome:
        run = ToolRun(
            call_id=invocation.call_id,
            workspace_id=invocation.workspace_id,
            name=invocation.name,
            handler=invocation.handler,
            arguments=invocation.arguments,
            timeout_s=invocation.timeout_s,
            pinned=invocation.pinned,
            reads_secrets=invocation.reads_secrets,
        )
        # The console log goes back with the outcome; the session's record stores it
        # after the turn has the result, off the event loop.
        if settings.CELERY_TASK_ALWAYS_EAGER:
            return _outcome(asdict(await tool_execute(run)))
        return await self._queued(invocation, run)

    async def _queued(self, invocation: ToolInvocation, run: ToolRun) -> ToolOutcome:
        deadline = min(invocation.timeout_s, settings.SANDBOX_WALL_TIME_S) + DEADLINE_MARGIN_S
        started = time.monotonic()
        future: asyncio.Future[ToolOutcome] = asyncio.get_running_loop().create_future()
        self._pending[invocation.call_id] = future
        try:
            async with fairness.workspace_slot(
                workspace_id=invocation.workspace_id,
                member=f"{invocation.session_id}:{invocation.call_id}",
                limit=settings.SANDBOX_WORKSPACE_CONCURRENCY,
                hold_s=deadline + DEADLINE_MARGIN_S,
                wait_s=deadline,
            ):
                left = deadline - (time.monotonic() - started)
                await asyncio.to_thread(self._enqueue, asdict(run), left)
                return await asyncio.wait_for(future, timeout=left)
        except TimeoutError:
            return ToolOutcome(
                status="timed_out", error=f"the tool did not answer within {deadline:g} s"
            )
        except fairness.NoSlot:
            return ToolOutcome(status="timed_out", error=BUSY)
        except (OperationalError, RedisError) as exc:  # the broker (Redis) cannot be reached
            logger.warning("tool call not queued: %s", type(exc).__name__)
            return ToolOutcome(status="failed", error=UNAVAILABLE)
        finally:
            self._pending.pop(invocation.call_id, None)

    def _enqueue(self, payload: dict[str, Any], deadline: float) -> None:
        # Once the session stops waiting, the call must not run: a message still queued
        # then (no worker was free, or a killed worker held it unstarted) expires, and a
        # started handler gets only the time left before that moment.
        tasks.execute.apply_async(
            args=(payload, self._reply_channel),
            kwargs={"not_after": time.time() + deadline},
            queue="sandbox",
            expires=deadline,
        )

    def resolve(self, message: dict[str, Any]) -> None:
        """A ``tool.result`` from a worker; late or unknown ones are dropped."""
        future = self._pending.get(str(message.get("call_id")))
        if future is not None and not future.done():
            future.set_result(_outcome(message))


def _outcome(message: dict[str, Any]) -> ToolOutcome:
    status = message.get("status")
    if status not in {"completed", "failed", "timed_out"}:
        return ToolOutcome(status="failed", error="the sandbox sent an unreadable outcome")
    cpu_ms = message.get("cpu_ms")
    masked_arguments = message.get("arguments")
    return ToolOutcome(
        status=status,
        result=message.get("result"),
        error=message.get("error"),
        log=message.get("console") or None,
        cpu_ms=float(cpu_ms) if isinstance(cpu_ms, int | float) else 0.0,
        masked_arguments=masked_arguments if isinstance(masked_arguments, str) else None,
    )
