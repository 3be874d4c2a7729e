"""The sandbox queue's only task: run a tool and send its outcome to the session.

The task process is the parent of a jailed sandbox worker (``tools_app.pool``): it
decrypts the workspace's secrets, hands the worker the call, serves its fetches and
sends the outcome back on the session's channel, all on one event loop that lives as
long as the process (so the channel layer's Redis connection and the worker stay warm).

Delivery is at most once: the message is acknowledged when a pool process takes it, so a
handler (which may have sent mail or charged a card) never runs twice. A V8 crash or a
limit costs only the jailed worker, which the parent replaces. If the task process itself
dies, Celery's main process reports the call failed (``WorkerLostError``); if the whole
worker dies, the session's own deadline reports it. A call still queued when the session
stopped waiting expires instead of running late, and a late start gets only the time left.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from asgiref.sync import async_to_sync
from billiard.exceptions import TimeLimitExceeded, WorkerLostError
from celery import shared_task
from celery.signals import task_failure, worker_process_init
from channels.layers import BaseChannelLayer, get_channel_layer
from django.conf import settings
from django.db import close_old_connections
from redis.exceptions import RedisError

from core.channel_messages import ToolResultDelivery, encode
from egress.secret_refs import SecretBinding
from engine.protocol import ToolStatus
from engine.tools.call import ToolRequest, ToolResult
from tools_app import pool
from tools_app.services import secret_bindings, tool_execute_with, warm_calls_pool

logger = logging.getLogger(__name__)

TASK_NAME = "tools.execute"
RETURN_MARGIN_S = 0.5  # the outcome's trip back to the session
REPLY_RETRIES_S = (0.05, 0.25, 1.0)
PLATFORM_ERROR = ToolResult(ToolStatus.FAILED, error="the tool could not be run (platform error)")
WORKER_LOST = (
    "the sandbox worker stopped while running this tool (for example out of memory); "
    "the call was not repeated"
)


# celery takes float time limits, celery-types only int (hence an untyped task here).
@shared_task(  # type: ignore[call-overload, untyped-decorator]
    name=TASK_NAME,
    acks_late=False,  # handlers are not idempotent: never run one twice
    soft_time_limit=settings.SANDBOX_WALL_TIME_S + 10,
    time_limit=settings.SANDBOX_WALL_TIME_S + 20,
    ignore_result=True,
)
def execute(payload: dict[str, Any], reply_channel: str, not_after: float | None = None) -> None:
    """``payload``: a ``ToolRequest.to_wire()``."""
    request = ToolRequest.from_wire(payload)
    if not_after is not None:
        left = not_after - time.time() - RETURN_MARGIN_S
        if left <= 0:
            logger.info("tool call dropped: its session stopped waiting for it")
            return
        request = request.with_timeout(min(float(request.timeout_s), left))
    run_tool(request, reply_channel)


def run_tool(run: ToolRequest, reply_channel: str) -> None:
    """Load the secrets here, run the call on this process's pool loop, reply from there."""
    # The connection is kept between tasks (CELERY_DB_REUSE_MAX); one that broke (a
    # database restart) or aged out is replaced here rather than failing calls.
    close_old_connections()
    try:
        bindings = secret_bindings(workspace_id=run.workspace_id)
    except Exception as exc:  # the database: never the message, it may quote data
        logger.error("tool secrets could not be loaded: %s", type(exc).__name__)
        _send(reply_channel, run.call_id, PLATFORM_ERROR)
        return
    pool.submit(_run_and_reply(run, bindings, reply_channel)).result()


async def _run_and_reply(
    run: ToolRequest, bindings: list[SecretBinding], reply_channel: str
) -> None:
    try:
        outcome = await tool_execute_with(run, bindings)
    except Exception as exc:
        logger.error("tool execution failed: %s", type(exc).__name__)
        outcome = PLATFORM_ERROR
    await _reply(reply_channel, _message(run.call_id, outcome))


async def _reply(reply_channel: str, message: dict[str, Any]) -> None:
    """The connection this loop keeps to Redis may have died with a Redis restart: the
    first use after it fails, the next one reconnects. (A repeat is harmless: the
    session takes the first outcome of a call and drops any other.)"""
    for delay in REPLY_RETRIES_S:
        try:
            await _channel_layer().send(reply_channel, message)
            return
        except (RedisError, OSError) as exc:
            logger.warning("tool outcome not sent yet: %s", type(exc).__name__)
            await asyncio.sleep(delay)
    await _channel_layer().send(reply_channel, message)


def _message(call_id: str, outcome: ToolResult) -> dict[str, Any]:
    return encode(ToolResultDelivery(call_id=call_id, result=outcome))


def _send(reply_channel: str, call_id: str, outcome: ToolResult) -> None:
    async_to_sync(_channel_layer().send)(reply_channel, _message(call_id, outcome))


def _channel_layer() -> BaseChannelLayer:
    layer = get_channel_layer()
    assert layer is not None, "settings.CHANNEL_LAYERS always names a default layer"
    return layer


@worker_process_init.connect
def _warm_sandbox(**_: Any) -> None:
    """Each task process starts its jailed worker before the first call arrives."""
    warm_calls_pool()


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
        outcome = ToolResult(ToolStatus.FAILED, error=WORKER_LOST)
    elif isinstance(exception, TimeLimitExceeded):
        outcome = ToolResult(ToolStatus.TIMED_OUT, error="the tool ran out of time and was stopped")
    else:
        return
    try:
        payload, reply_channel = args[0], args[1]
        logger.warning("tool call lost with its pool process: %s", type(exception).__name__)
        _send(reply_channel, payload["call_id"], outcome)
    except Exception as exc:
        logger.error("could not report a lost tool call: %s", type(exc).__name__)
