"""Keeps the database record of a live session, off the event loop.

Observes the events a session emits and writes them in order from one background
task, so a slow database never delays audio or events.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from channels.db import database_sync_to_async

from sessions_app import selectors, services
from sessions_app.access import Access
from sessions_app.models import Agent, Session
from sessions_app.orchestrator.config import SettledToolCall

logger = logging.getLogger(__name__)

_TERMINAL_TOOL_STATUSES = {"completed", "failed", "timed_out", "cancelled"}


class SessionRecorder:
    def __init__(self) -> None:
        self._queue: asyncio.Queue[Callable[[], None] | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._session: Session | None = None

    async def start(
        self, *, session_id: str, access: Access, mode: str, agent: Agent | None
    ) -> None:
        self._session = await database_sync_to_async(services.session_record_start)(
            session_id=session_id,
            workspace=access.workspace,
            api_key=access.key,
            origin=access.origin,
            mode=mode,
            agent=agent,
            end_user=access.end_user,
        )
        self._task = asyncio.create_task(self._write_loop())

    def observe(self, event: dict[str, Any]) -> None:
        session = self._session
        if session is None:
            return
        kind = event["type"]
        if kind == "turn":
            self._write(
                lambda: services.session_record_append(
                    session=session, entries=[("user", event["text"])]
                )
            )
        elif kind == "chat":
            self._write(
                lambda: services.session_record_append(
                    session=session, entries=[("assistant", event["text"])]
                )
            )
            self._write(lambda: services.session_record_count(session=session, turns=1))
        elif kind == "metrics":
            metrics = {k: v for k, v in event.items() if k not in ("type", "seq", "ts")}
            self._write(lambda: services.session_record_turn(session=session, metrics=metrics))
        elif kind == "tool_status" and event.get("status") in _TERMINAL_TOOL_STATUSES:
            self._write(lambda: services.session_record_count(session=session, tool_calls=1))

    def tool_settled(self, call: SettledToolCall) -> None:
        """The session's ``on_tool_settled``: keep the call (scrubbed when written)."""
        session = self._session
        if session is None:
            return
        self._write(
            lambda: services.session_record_tool_call(
                session=session,
                call_id=call.call_id,
                name=call.name,
                arguments=call.arguments,
                status=call.status,
                result=call.result,
                error=call.error,
                duration_ms=call.duration_ms,
            )
        )

    async def resume(self, *, session_id: str, workspace_id: int) -> None:
        """Go on with the record of a session resumed from another process."""
        self._session = await database_sync_to_async(selectors.session_record_find)(
            workspace_id=workspace_id, session_id=session_id
        )
        if self._session is not None:
            self._task = asyncio.create_task(self._write_loop())

    async def pause(self) -> None:
        """Write what is queued, then stop, leaving the record open: the session moved on."""
        if self._task is not None:
            self._queue.put_nowait(None)
            await self._task
        self._session, self._task = None, None

    async def finish(self, close_code: int | None) -> None:
        session = self._session
        if session is None or self._task is None:
            return
        self._write(lambda: services.session_record_end(session=session, close_code=close_code))
        self._queue.put_nowait(None)
        await self._task

    def _write(self, operation: Callable[[], None]) -> None:
        self._queue.put_nowait(operation)

    async def _write_loop(self) -> None:
        while (operation := await self._queue.get()) is not None:
            try:
                await database_sync_to_async(operation)()
            except Exception as exc:
                # The type only: database errors can quote the row (transcript text).
                logger.error("session record write failed: %s", type(exc).__name__)
