"""``Connection``: one socket, from the handshake to the close; it routes what the client
sends and is the session's ``Sink``. The jobs it hands out live beside it (see the package)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from sessions_app import access as access_rules
from sessions_app import limits, metrics, protocol, resume
from sessions_app.connection import handshake, resuming, starting
from sessions_app.connection.places import Places
from sessions_app.connection.refusals import (
    BAD_PROTOCOL,
    CLEAN_CLOSES,
    CLOSE_DISPLACED,
    RESUME_REFUSED,
    SERVICE_UNAVAILABLE,
    UNAVAILABLE,
    Refusal,
    configure_timeout,
)
from sessions_app.orchestrator import VoiceSession
from sessions_app.protocol import ErrorCode
from sessions_app.records import SessionRecorder
from sessions_app.session_setup import new_session_ids

# The package's name: log configuration written for the single module keeps matching.
logger = logging.getLogger("sessions_app.connection")

SendText = Callable[[str], Awaitable[None]]
SendBytes = Callable[[bytes], Awaitable[None]]
Close = Callable[[int, str], Awaitable[None]]


class Connection:
    def __init__(
        self, *, send_text: SendText, send_bytes: SendBytes, close: Close, channel_name: str = ""
    ) -> None:
        self._send_text, self._send_bytes, self._close = send_text, send_bytes, close
        self._channel_name = channel_name
        self._codec: protocol.V1Codec | protocol.VoiceIDECodec = protocol.V1Codec()
        self._access: access_rules.Access | None = None
        self._host: resume.SessionHost | None = None
        self._session_id, self._resume_token = new_session_ids()
        # Places this connection took for a session it is still setting up.
        self._places = Places(self._session_id)
        self._pre_seq = 0  # events sent before the session exists
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self._budget = limits.InboundBudget()

    @property
    def _session(self) -> VoiceSession | None:
        return self._host.session if self._host is not None else None

    # ---------------------------------------------------------------- from the consumer

    async def open(self, *, query: dict[str, str], origin: str | None, address: str = "") -> None:
        try:
            self._codec = protocol.codec_for(
                query.get("protocol", "v1"), session_id=self._session_id
            )
        except ValueError:
            await self._refuse(BAD_PROTOCOL)
            return
        try:
            admitted = await handshake.admit(query=query, origin=origin, address=address)
        except UNAVAILABLE:
            await self._unavailable()
            return
        if isinstance(admitted, Refusal):
            await self._refuse(admitted)
            return
        self._access = admitted
        self._tasks = [asyncio.create_task(self._first_message_deadline())]

    async def receive_text(self, text: str) -> None:
        if self._closing or self._access is None:
            return
        flood = self._budget.message()
        if flood is not None:
            await self._flooded(*flood)
            return
        try:
            message = protocol.decode(text)
        except protocol.ProtocolError as error:
            await self._error(error.code, error.message)
            return
        if self._host is not None:
            await self._host.handle(message)
            return
        try:
            if isinstance(message, protocol.ConfigureMessage):
                await self._configure(message)
            elif isinstance(message, protocol.ResumeMessage):
                await self._resume(message)
            elif isinstance(message, protocol.PingMessage):
                # Keep-alives and latency probes work before configure, as after it.
                await self._send_early(protocol.PongEvent.answering(message))
            else:
                await self._error(ErrorCode.NOT_CONFIGURED, "send configure first")
        except UNAVAILABLE:
            await self._places.release()
            await self._unavailable()

    async def receive_bytes(self, data: bytes) -> None:
        if self._closing or self._access is None:
            return
        flood = self._budget.message()
        if flood is not None:
            await self._flooded(*flood)
        elif len(data) > protocol.BINARY_FRAME_MAX:
            await self._error(
                ErrorCode.FRAME_TOO_LARGE,
                f"audio frames are limited to {protocol.BINARY_FRAME_MAX} bytes",
            )
        elif (session := self._session) is None:
            await self._error(ErrorCode.NOT_CONFIGURED, "send configure before audio")
        elif (flood := self._budget.audio(len(data))) is not None:
            await self._flooded(*flood)
        else:
            await session.push_audio(data)

    def tool_result(self, message: dict[str, Any]) -> None:
        """An outcome from a sandbox worker sent to this connection's channel."""
        if self._host is not None:
            self._host.tool_result(message)

    async def closed(self, code: int | None) -> None:
        self._closing = True
        for task in self._tasks:
            task.cancel()
        if self._host is not None:
            await resume.shielded(self._host.disconnected(self, code, clean=code in CLEAN_CLOSES))
        await self._places.release()

    # ---------------------------------------------------------------- as the session's sink

    async def send_event(self, event: dict[str, Any]) -> None:
        if not self._closing:
            await self._send_text(self._codec.encode(event))

    async def send_audio(self, pcm: bytes) -> None:
        if not self._closing:
            await self._send_bytes(pcm)

    async def displace(self) -> None:
        if not self._closing:
            self._closing = True
            await self._close(CLOSE_DISPLACED, "the session was resumed on another connection")

    async def terminate(self, close_code: int, reason: str) -> None:
        """The session ended for a reason it already told the client: close the socket."""
        if not self._closing:
            self._closing = True
            await self._close(close_code, reason[:120])

    # ---------------------------------------------------------------- a new session

    async def _configure(self, message: protocol.ConfigureMessage) -> None:
        assert self._access is not None
        access = self._access
        refusal = await self._places.acquire(access)
        if refusal is not None:
            await self._refuse(refusal)
            return
        channel = await resume.new_channel()
        plan = await starting.plan_build(
            access=access,
            configure=message,
            session_id=self._session_id,
            resume_token=self._resume_token,
            reply_channel=channel or self._channel_name,
        )
        if isinstance(plan, Refusal):
            await self._places.release()  # a corrected configure asks again
            await self._refuse(plan)
            return
        self._tasks[0].cancel()  # the configure deadline
        host, session = await starting.host_begin(
            plan,
            access=access,
            recorder=SessionRecorder(),
            session_id=self._session_id,
            resume_token=self._resume_token,
            channel=channel,
            places=self._places,
            first_seq=self._pre_seq,
        )
        self._host = host
        await host.attach(self, last_seq=self._pre_seq, resume_token=self._resume_token)
        metrics.session_opened()
        logger.info(
            "session started: workspace=%s mode=%s llm=%s tools=%d",
            access.workspace.pk, plan.config.mode, plan.config.llm_name,
            len(plan.config.tools),
        )  # fmt: skip
        await session.start()

    # ---------------------------------------------------------------- resuming a session

    async def _resume(self, message: protocol.ResumeMessage) -> None:
        assert self._access is not None
        self._tasks[0].cancel()  # a handover may take a while; the deadline is re-armed on failure
        stored = await resuming.stored_session(
            message.session_id, workspace_id=self._access.workspace.pk
        )
        if stored is None:
            await self._resume_unavailable()
            return
        if not resume.token_matches(message.resume_token, stored.meta.get("tokenDigest", "")):
            await self._refuse(RESUME_REFUSED)
            return
        host = resume.local_host(message.session_id)
        if host is not None and resuming.client_is_ahead(host, message):
            await self._resume_unavailable()
            return
        moved = host is None
        if host is None:
            host = await resuming.take_over(
                message, stored, access=self._access, channel_name=self._channel_name
            )
        if host is None or not await self._attach(host, message):
            await self._resume_unavailable()
            return
        if moved:
            assert host.session is not None
            await host.session.resume()
        logger.info(
            "session resumed: workspace=%s from_another_process=%s",
            self._access.workspace.pk, moved,
        )  # fmt: skip

    async def _attach(self, host: resume.SessionHost, message: protocol.ResumeMessage) -> bool:
        self._host = host
        if isinstance(self._codec, protocol.VoiceIDECodec):
            self._codec.session_id = message.session_id
        attached = await host.attach(
            self, last_seq=message.last_seq, resume_token=message.resume_token
        )
        if not attached:
            self._host = None
            return False
        self._session_id = message.session_id
        return True

    async def _resume_unavailable(self) -> None:
        # The socket stays open: the browser library gives up on this error and closes it,
        # and a client of its own may send `configure` for a new session instead.
        await self._error(
            ErrorCode.RESUME_UNAVAILABLE, "this session ended or expired; start a new one"
        )
        if not self._closing:
            self._tasks[0] = asyncio.create_task(self._first_message_deadline())

    # ---------------------------------------------------------------- errors and limits

    async def _error(self, code: ErrorCode, message: str) -> None:
        if self._session is not None:
            await self._session.handle_error(code, message)
            return
        await self._send_early(protocol.ErrorEvent(code=code, message=message))

    async def _send_early(self, event: protocol.ServerEvent) -> None:
        """An event before the session exists, numbered ahead of the session's own."""
        self._pre_seq += 1
        wire = event.to_wire(seq=self._pre_seq, ts=int(time.time() * 1000))
        metrics.observe_event(wire)
        await self._send_text(self._codec.encode(wire))

    async def _refuse(self, refusal: Refusal) -> None:
        """Say why in an `error` event (close reasons are dropped by some servers), then
        close; a refusal without a close code leaves the socket open."""
        if refusal.close_code is None:
            await self._error(refusal.code, refusal.message)
            return
        if self._closing:
            return
        await self._error(refusal.code, refusal.message)
        self._closing = True
        await self._close(refusal.close_code, refusal.message[:120])

    async def _flooded(self, code: ErrorCode, message: str) -> None:
        """More than a person or a microphone sends: the session ends, not to be resumed."""
        if self._host is not None:
            await self._host.terminate(code, message, access_rules.CLOSE_TOO_MANY)
        else:
            await self._refuse(Refusal(access_rules.CLOSE_TOO_MANY, code, message))

    async def _first_message_deadline(self) -> None:
        await asyncio.sleep(settings.CONFIGURE_TIMEOUT_S)
        if self._host is None:
            await self._refuse(configure_timeout())

    async def _unavailable(self) -> None:
        logger.warning("session refused: Redis is unavailable")
        await self._refuse(SERVICE_UNAVAILABLE)
