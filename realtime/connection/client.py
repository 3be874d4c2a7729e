"""``Connection``: one door's connection, from the handshake to the close: the host of the
transport seam (``engine.doors.DoorHost``) for every door. It routes what the client sends
and is the session's ``Sink``; what goes out goes through the ``Door`` (the browser's
WebSocket, a carrier's media stream), audio converted on the way by ``DoorAudio``. The jobs
it hands out live beside it (see the package)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from django.conf import settings

from engine import metrics, protocol
from engine.doors.door import Door, DoorAudio
from engine.protocol import CloseCode, ErrorCode
from engine.session import VoiceSession
from realtime import access as access_rules
from realtime import drain, limits, resume
from realtime.connection import handshake, resuming, starting
from realtime.connection.refusals import (
    BAD_PROTOCOL,
    CLEAN_CLOSES,
    DRAINING,
    RESUME_REFUSED,
    SERVICE_UNAVAILABLE,
    UNAVAILABLE,
    Refusal,
    configure_timeout,
)
from realtime.connection.setup_leases import SetupLeases
from realtime.records import SessionRecorder
from realtime.session_setup import new_session_ids

# The package's name: log configuration written for the single module keeps matching.
logger = logging.getLogger("realtime.connection")


class Connection:
    def __init__(self, *, door: Door, channel_name: str = "") -> None:
        self._door, self._audio = door, DoorAudio(door)
        # The client can reconnect and resume (a browser; a carrier's stream cannot): on a
        # drain it is told to move (``SessionHost.drain``).
        self.movable = door.resumable
        self._channel_name = channel_name
        self._access: access_rules.Access | None = None
        self._host: resume.SessionHost | None = None
        self._session_id, self._resume_token = new_session_ids()
        # SetupLeases this connection took for a session it is still setting up.
        self._places = SetupLeases(self._session_id)
        self._pre_seq = 0  # events sent before the session exists
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self._budget = limits.InboundBudget()

    @property
    def _session(self) -> VoiceSession | None:
        return self._host.session if self._host is not None else None

    # ---------------------------------------------------------------- from the door

    async def open(
        self, *, credentials: Mapping[str, str], origin: str | None, address: str = ""
    ) -> None:
        """``credentials``: the door's query (``key`` or ``token``, ``agent``, ``protocol``)."""
        query = dict(credentials)
        try:
            self._door.use_encoding(query.get("protocol", "v1"), session_id=self._session_id)
        except ValueError:
            await self._refuse(BAD_PROTOCOL)
            return
        if drain.draining():
            await self._refuse(DRAINING)
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
        """A text frame of the browser's protocol: counted, decoded, then routed."""
        if not self._admitted():
            return
        try:
            message = protocol.decode(text)
        except protocol.ProtocolError as error:
            await self._error(error.code, error.message)
            return
        await self._route(message)

    async def control(self, message: protocol.ClientMessage) -> None:
        """A message the door decoded itself (counted like a frame)."""
        if self._admitted():
            await self._route(message)

    def _admitted(self) -> bool:
        """Whether a message may be handled: the socket is open (its messages were counted
        as they arrived, ``inbound.InboundByteGate``)."""
        return not (self._closing or self._access is None)

    async def _route(self, message: protocol.ClientMessage) -> None:
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

    async def audio(self, data: bytes) -> None:
        """The caller's audio in the door's own format (a browser's binary frame)."""
        if self._closing or self._access is None:
            return
        if len(data) > protocol.BINARY_FRAME_MAX:
            await self._error(
                ErrorCode.FRAME_TOO_LARGE,
                f"audio frames are limited to {protocol.BINARY_FRAME_MAX} bytes",
            )
        elif (session := self._session) is None:
            await self._error(ErrorCode.NOT_CONFIGURED, "send configure before audio")
        elif not (pcm := self._audio.heard(data)):
            return  # the door's resampler is still filling
        elif (flood := self._budget.audio(len(pcm))) is not None:
            await self._flooded(*flood)
        else:
            await session.push_audio(pcm)

    async def closed(self, code: int | None) -> None:
        """The door's connection closed; a door that cannot resume always closes cleanly."""
        self._closing = True
        for task in self._tasks:
            task.cancel()
        if self._host is not None:
            clean = code in CLEAN_CLOSES or not self._door.resumable
            await resume.shielded(self._host.disconnected(self, code, clean=clean))
        await self._places.release()

    # ---------------------------------------------------------------- as the session's sink

    async def send_event(self, event: protocol.Stamped) -> None:
        if not self._closing:
            await self._door.send_event(event)

    async def send_audio(self, pcm: bytes) -> None:
        session = self._session
        if not self._closing and session is not None:
            await self._audio.say(pcm, session_rate=session.config.tts_sample_rate)

    async def displace(self) -> None:
        if not self._closing:
            self._closing = True
            await self._door.close(
                CloseCode.DISPLACED, "the session was resumed on another connection"
            )

    async def terminate(self, close_code: int, reason: str) -> None:
        """The session ended for a reason it already told the client: close the socket."""
        if not self._closing:
            self._closing = True
            await self._door.close(close_code, reason[:120])

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
            call=self._door.call,
            played_ms=self._door.played_ms,
        )
        self._hosted(host)
        await host.attach(self, last_seq=self._pre_seq, resume_token=self._resume_token)
        metrics.session_opened()
        logger.info(
            "session started: workspace=%s door=%s mode=%s llm=%s tools=%d",
            access.workspace.pk, self._door.name, plan.config.mode, plan.config.llm_name,
            len(plan.config.tools),
        )  # fmt: skip
        await session.start()

    # ---------------------------------------------------------------- resuming a session

    async def _resume(self, message: protocol.ResumeMessage) -> None:
        assert self._access is not None
        if not self._door.resumable:  # its sessions end with their connection
            await self._error(ErrorCode.RESUME_UNAVAILABLE, "this connection cannot resume")
            return
        self._tasks[0].cancel()  # a handover may take a while; the deadline is re-armed on failure
        stored = await resuming.stored_session(
            message.session_id, workspace_id=self._access.workspace.pk
        )
        if stored is None:
            await self._resume_unavailable()
            return
        matches = resume.token_matches(message.resume_token, stored.meta.get("tokenDigest", ""))
        if not matches or not resuming.resume_allowed(stored, self._access):
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
        self._hosted(host)
        self._door.session_named(message.session_id)
        attached = await host.attach(
            self, last_seq=message.last_seq, resume_token=message.resume_token
        )
        if not attached:
            self._hosted(None)
            return False
        self._session_id = message.session_id
        return True

    def _hosted(self, host: resume.SessionHost | None) -> None:
        """The session this connection carries; its recording (if any) hears the door."""
        self._host = host
        self._audio.capture = host.capture if host is not None else None

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
        metrics.observe_event(event)
        await self._door.send_event(
            protocol.Stamped(event, seq=self._pre_seq, ts=int(time.time() * 1000))
        )

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
        await self._door.close(refusal.close_code, refusal.message[:120])

    async def flooded(self, reason: str) -> None:
        """The socket sent more messages or bytes than its budget (``inbound.InboundByteGate``)."""
        await self._flooded(ErrorCode.TOO_MANY_MESSAGES, reason)

    async def _flooded(self, code: ErrorCode, message: str) -> None:
        """More than a person or a microphone sends: the session ends, not to be resumed."""
        if self._host is not None:
            await self._host.terminate(code, message, CloseCode.TOO_MANY)
        else:
            await self._refuse(Refusal(CloseCode.TOO_MANY, code, message))

    async def _first_message_deadline(self) -> None:
        await asyncio.sleep(settings.CONFIGURE_TIMEOUT_S)
        if self._host is None:
            await self._refuse(configure_timeout())

    async def _unavailable(self) -> None:
        logger.warning("session refused: Redis is unavailable")
        await self._refuse(SERVICE_UNAVAILABLE)
