"""The sandbox queue's only task: run a tool and send its outcome to the session.

Delivery is at most once: the message is acknowledged when a pool process takes it, so a
handler (which may have sent mail or charged a card) never runs twice, and one that kills
its process is not run again and again. A worker that dies mid-call must not lose the call
silently, though: when only the pool process dies (the kernel's OOM killer, a V8 crash),
the worker's main process reports the call failed as soon as Celery sees the exit (at
once, or at its pool check every 5 s); when the whole worker dies, the session's own
deadline reports it. A call still queued when the session stopped waiting expires
instead of running late, and a late start gets only the time left.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict
from typing import Any

from asgiref.sync import async_to_sync
from billiard.exceptions import TimeLimitExceeded, WorkerLostError
from celery import shared_task
from celery.signals import task_failure
from channels.layers import get_channel_layer
from django.conf import settings

from tools_app.services import ToolRun, ToolRunOutcome, tool_execute

logger = logging.getLogger(__name__)

TASK_NAME = "tools.execute"
RETURN_MARGIN_S = 0.5  # the outcome's trip back to the session
WORKER_LOST = (
    "the sandbox worker stopped while running this tool (for example out of memory); "
    "the call was not repeated"
)


def run_tool(payload: dict[str, Any]) -> ToolRunOutcome:
    """Run one tool in this thread, whatever happens returning an outcome."""
    try:
        return asyncio.run(tool_execute(ToolRun(**payload)))
    except Exception as exc:
        # Never the message: it may quote handler data.
        logger.error("tool execution failed: %s", type(exc).__name__)
        return ToolRunOutcome(status="failed", error="the tool could not be run (platform error)")


@shared_task(
    name=TASK_NAME,
    acks_late=False,  # handlers are not idempotent: never run one twice
    soft_time_limit=settings.SANDBOX_WALL_TIME_S + 10,
    time_limit=settings.SANDBOX_WALL_TIME_S + 20,
    ignore_result=True,
)
def execute(payload: dict[str, Any], reply_channel: str, not_after: float | None = None) -> None:
    if not_after is not None:
        left = not_after - time.time() - RETURN_MARGIN_S
        if left <= 0:
            logger.info("tool call dropped: its session stopped waiting for it")
            return
        payload = {**payload, "timeout_s": min(float(payload["timeout_s"]), left)}
    _send(reply_channel, payload["call_id"], run_tool(payload))


def _send(reply_channel: str, call_id: str, outcome: ToolRunOutcome) -> None:
    message = {"type": "tool.result", "call_id": call_id, **asdict(outcome)}
    async_to_sync(get_channel_layer().send)(reply_channel, message)


@task_failure.connect
def _report_lost_call(
    sender: Any = None,
    exception: BaseException | None = None,
    args: Any = None,
    **_: Any,
) -> None:
    """Runs in the worker's main process when the pool process running a call died."""
    if getattr(sender, "name", None) != TASK_NAME:
        return
    if isinstance(exception, WorkerLostError):
        outcome = ToolRunOutcome(status="failed", error=WORKER_LOST)
    elif isinstance(exception, TimeLimitExceeded):
        outcome = ToolRunOutcome(
            status="timed_out", error="the tool ran out of time and was stopped"
        )
    else:
        return
    try:
        payload, reply_channel = args[0], args[1]
        logger.warning("tool call lost with its pool process: %s", type(exception).__name__)
        _send(reply_channel, payload["call_id"], outcome)
    except Exception as exc:
        logger.error("could not report a lost tool call: %s", type(exc).__name__)
