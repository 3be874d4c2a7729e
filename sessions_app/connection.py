"""One realtime connection, from the handshake to the close, without Channels.

The consumer hands frames in and provides ``send_text``/``send_bytes``/``close``;
everything else (authorisation, the configure deadline, building the session,
session limits, records) happens here, so it reads top to bottom and tests
without a socket where that helps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from sessions_app import access as access_rules
from sessions_app import live, protocol
from sessions_app.orchestrator import VoiceSession
from sessions_app.records import SessionRecorder
from sessions_app.session_setup import ConfigureRefused, new_session_ids, session_plan_build

logger = logging.getLogger(__name__)

SendText = Callable[[str], Awaitable[None]]
SendBytes = Callable[[bytes], Awaitable[None]]
Close = Callable[[int, str], Awaitable[None]]


class Connection:
    def __init__(
        self, *, send_text: SendText, send_bytes: SendBytes, close: Close, channel_name: str = ""
    ) -> None:
        self._send_text, self._send_bytes, self._close = send_text, send_bytes, close
        self._channel_name = channel_name
        self._tool_runner: Any = None
        self._codec: protocol.V1Codec | protocol.VoiceIDECodec = protocol.V1Codec()
        self._access: access_rules.Access | None = None
        self._session: VoiceSession | None = None
        self._session_id, self._resume_token = new_session_ids()
        self._recorder = SessionRecorder()
        self._pre_seq = 0  # events sent before the session exists
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False

    # ---------------------------------------------------------------- from the consumer

    async def open(self, *, query: dict[str, str], origin: str | None) -> None:
        try:
            self._codec = protocol.codec_for(
                query.get("protocol", "v1"), session_id=self._session_id
            )
        except ValueError:
            await self._refuse(
                access_rules.CLOSE_NO_CONFIGURE, "bad_protocol", "protocol must be v1 or voiceide"
            )
            return
        try:
            self._access = await database_sync_to_async(access_rules.authorize_connection)(
                key=query.get("key", ""), origin=origin, agent_slug=query.get("agent") or None
            )
            await self._acquire_lease()
        except access_rules.ConnectionRefused as refused:
            self._access = None
            await self._refuse(refused.close_code, refused.code, refused.message)
            return
        self._tasks = [
            asyncio.create_task(self._configure_deadline()),
            asyncio.create_task(self._renew_lease()),
        ]

    async def receive_text(self, text: str) -> None:
        if self._closing or self._access is None:
            return
        try:
            message = protocol.decode(text)
        except protocol.ProtocolError as error:
            await self._error(error.code, error.message)
            return
        if self._session is not None:
            await self._session.handle(message)
        elif isinstance(message, protocol.ConfigureMessage):
            await self._configure(message)
        elif isinstance(message, protocol.ResumeMessage):
            await self._error("resume_unavailable", "resuming sessions is not available yet")
        else:
            await self._error("not_configured", "send configure first")

    async def receive_bytes(self, data: bytes) -> None:
        if self._closing or self._access is None:
            return
        if len(data) > protocol.BINARY_FRAME_MAX:
            await self._error(
                "frame_too_large", f"audio frames are limited to {protocol.BINARY_FRAME_MAX} bytes"
            )
        elif self._session is None:
            await self._error("not_configured", "send configure before audio")
        else:
            await self._session.push_audio(data)

    def tool_result(self, message: dict[str, Any]) -> None:
        """An outcome from a sandbox worker, on this connection's channel."""
        resolve = getattr(self._tool_runner, "resolve", None)
        if resolve is not None:
            resolve(message)

    async def closed(self, code: int | None) -> None:
        self._closing = True
        for task in self._tasks:
            task.cancel()
        if self._session is not None:
            await self._session.close()
        await self._recorder.finish(code)
        if self._access is not None:
            await live.release(workspace_id=self._access.workspace.pk, session_id=self._session_id)

    # ---------------------------------------------------------------- the session

    async def _configure(self, message: protocol.ConfigureMessage) -> None:
        assert self._access is not None
        try:
            plan = await database_sync_to_async(session_plan_build)(
                access=self._access,
                configure=message,
                session_id=self._session_id,
                resume_token=self._resume_token,
                reply_channel=self._channel_name,
            )
        except access_rules.ConnectionRefused as refused:
            await self._refuse(refused.close_code, refused.code, refused.message)
            return
        except ConfigureRefused as refused:
            if refused.close_code is None:
                await self._error(refused.code, refused.message)
            else:
                await self._refuse(refused.close_code, refused.code, refused.message)
            return
        self._tasks[0].cancel()  # the configure deadline
        self._tool_runner = plan.tool_runner
        await self._recorder.start(
            session_id=self._session_id,
            access=self._access,
            mode=plan.config.mode,
            agent=plan.agent,
        )
        self._session = VoiceSession(
            config=plan.config,
            llm=plan.llm,
            stt=plan.stt,
            tts=plan.tts,
            tool_runner=plan.tool_runner,
            emit=self._emit,
            on_tool_settled=self._recorder.tool_settled,
            send_audio=self._send_bytes,
            first_seq=self._pre_seq,
        )
        logger.info(
            "session started: workspace=%s mode=%s llm=%s tools=%d",
            self._access.workspace.pk, plan.config.mode, plan.config.llm_name,
            len(plan.config.tools),
        )  # fmt: skip
        await self._session.start()

    async def _emit(self, event: dict[str, Any]) -> None:
        self._recorder.observe(event)
        if not self._closing:
            await self._send_text(self._codec.encode(event))

    # ---------------------------------------------------------------- errors and limits

    async def _error(self, code: str, message: str) -> None:
        if self._session is not None:
            await self._session.handle_error(code, message)
            return
        self._pre_seq += 1
        event = {
            "type": "error",
            "seq": self._pre_seq,
            "ts": int(time.time() * 1000),
            "code": code,
            "message": message,
        }
        await self._send_text(self._codec.encode(event))

    async def _refuse(self, close_code: int, code: str, message: str) -> None:
        """Say why in an `error` event (close reasons are dropped by some servers), then close."""
        if self._closing:
            return
        await self._error(code, message)
        self._closing = True
        await self._close(close_code, message[:120])

    async def _configure_deadline(self) -> None:
        await asyncio.sleep(settings.CONFIGURE_TIMEOUT_S)
        if self._session is None:
            await self._refuse(
                access_rules.CLOSE_NO_CONFIGURE,
                "configure_timeout",
                f"no configure within {settings.CONFIGURE_TIMEOUT_S:g} s",
            )

    async def _acquire_lease(self) -> None:
        assert self._access is not None
        workspace = self._access.workspace
        limit = workspace.session_limit or settings.SESSION_LIMIT_PER_WORKSPACE
        granted = await live.acquire(
            workspace_id=workspace.pk, session_id=self._session_id, limit=limit
        )
        if not granted:
            raise access_rules.ConnectionRefused(
                access_rules.CLOSE_TOO_MANY,
                "too_many_sessions",
                f"this workspace already has {limit} sessions open",
            )

    async def _renew_lease(self) -> None:
        assert self._access is not None
        while True:
            await asyncio.sleep(live.LEASE_S / 3)
            with contextlib.suppress(Exception):
                await live.renew(
                    workspace_id=self._access.workspace.pk, session_id=self._session_id
                )
