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
from typing import Any

from django.conf import settings
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from core import backends
from engine.protocol import ToolStatus
from engine.providers.spec import ProviderSpec
from engine.tools.call import ToolRequest, ToolResult
from engine.tools.runner import SANDBOX, ToolRunner
from tools_app import fairness, tasks
from tools_app.services import tool_execute

DEADLINE_MARGIN_S = 2.0  # queueing and the trip back, on top of the handler's own limit
UNAVAILABLE = "the tool service is unavailable right now (try again in a moment)"
BUSY = "this workspace's other tool calls kept every sandbox slot busy; try again"

logger = logging.getLogger(__name__)


class SandboxToolRunner(ToolRunner):
    kind = SANDBOX

    def __init__(self, *, reply_channel: str = "") -> None:
        self._reply_channel = reply_channel
        self._pending: dict[str, asyncio.Future[ToolResult]] = {}

    async def run(self, request: ToolRequest) -> ToolResult:
        # The console log goes back with the result; the session's record stores it
        # after the turn has the result, off the event loop.
        if backends.tasks_inline():
            return await tool_execute(request)
        return await self._queued(request)

    async def _queued(self, request: ToolRequest) -> ToolResult:
        deadline = min(request.timeout_s, settings.SANDBOX_WALL_TIME_S) + DEADLINE_MARGIN_S
        started = time.monotonic()
        future: asyncio.Future[ToolResult] = asyncio.get_running_loop().create_future()
        self._pending[request.call_id] = future
        try:
            async with fairness.workspace_slot(
                workspace_id=request.workspace_id,
                member=f"{request.session_id}:{request.call_id}",
                limit=settings.SANDBOX_WORKSPACE_CONCURRENCY,
                hold_s=deadline + DEADLINE_MARGIN_S,
                wait_s=deadline,
            ):
                left = deadline - (time.monotonic() - started)
                await asyncio.to_thread(self._enqueue, request.to_wire(), left)
                return await asyncio.wait_for(future, timeout=left)
        except TimeoutError:
            return ToolResult(
                ToolStatus.TIMED_OUT, error=f"the tool did not answer within {deadline:g} s"
            )
        except fairness.NoSlot:
            return ToolResult(ToolStatus.TIMED_OUT, error=BUSY)
        except (OperationalError, RedisError) as exc:  # the broker (Redis) cannot be reached
            logger.warning("tool call not queued: %s", type(exc).__name__)
            return ToolResult(ToolStatus.FAILED, error=UNAVAILABLE)
        finally:
            self._pending.pop(request.call_id, None)

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

    def resolve(self, call_id: str, result: ToolResult) -> bool:
        """A worker's result (``tool.result``); late or unknown ones are dropped."""
        future = self._pending.get(call_id)
        if future is None or future.done():
            return False
        future.set_result(result)
        return True


PROVIDER = ProviderSpec(kind="tools", name="sandbox", label="Sandbox", adapter=SandboxToolRunner)
