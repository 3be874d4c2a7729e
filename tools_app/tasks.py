"""The sandbox queue's only task: run a tool and send its outcome to the session."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict
from typing import Any

from asgiref.sync import async_to_sync
from celery import shared_task
from channels.layers import get_channel_layer
from django.conf import settings

from tools_app.services import ToolRun, ToolRunOutcome, tool_execute

logger = logging.getLogger(__name__)


def run_tool(payload: dict[str, Any]) -> ToolRunOutcome:
    """Run one tool in this thread, whatever happens returning an outcome."""
    try:
        return asyncio.run(tool_execute(ToolRun(**payload)))
    except Exception as exc:
        # Never the message: it may quote handler data.
        logger.error("tool execution failed: %s", type(exc).__name__)
        return ToolRunOutcome(status="failed", error="the tool could not be run (platform error)")


@shared_task(
    name="tools.execute",
    acks_late=False,  # handlers are not idempotent: never run one twice
    soft_time_limit=settings.SANDBOX_WALL_TIME_S + 10,
    time_limit=settings.SANDBOX_WALL_TIME_S + 20,
    ignore_result=True,
)
def execute(payload: dict[str, Any], reply_channel: str) -> None:
    outcome = run_tool(payload)
    message = {"type": "tool.result", "call_id": payload["call_id"], **asdict(outcome)}
    async_to_sync(get_channel_layer().send)(reply_channel, message)
