"""One realtime connection, from the handshake to the close, without Channels.

The consumer hands frames in and provides ``send_text``/``send_bytes``/``close``;
everything else (authorisation, connection rates, the configure deadline, building or
resuming the session, session limits) happens here, so it reads top to bottom and tests
without a socket where that helps. A socket that has not configured a session holds no
place in any session limit.

The session itself lives in a ``SessionHost`` (``sessions_app.resume``), which outlives
this connection: after an unclean close it waits for ``resume``, on this process or
another; a clean close (1000 from ``stop()``, 1001 from a page going away) ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from redis.exceptions import RedisError

from platform_site.rates import StorageError
from secrets_app import selectors as key_selectors
from sessions_app import access as access_rules
from sessions_app import limits, live, metrics, protocol, resume
from sessions_app.orchestrator import VoiceSession
from sessions_app.protocol import ErrorCode
from sessions_app.quota_gate import quota_gate
from sessions_app.records import SessionRecorder
from sessions_app.session_setup import (
    ConfigureRefused,
    SessionPlan,
    new_session_ids,
    session_config_restore,
    session_meta,
    session_plan_build,
    session_plan_restore,
)

logger = logging.getLogger(__name__)

SendText = Callable[[str], Awaitable[None]]
SendBytes = Callable[[bytes], Awaitable[None]]
Close = Callable[[int, str], Awaitable[None]]

# The client stopped (1000, as stop() sends) or its page went away (1001, a closed tab or a
# navigation: nothing there will resume): the session ends at once and frees its place.
CLEAN_CLOSES = frozenset({1000, 1001})
# A service the session needs (Redis) is down: try again later. (1013 would say so, but
# daphne may only send 1000 or 3000-4999.)
CLOSE_TRY_AGAIN = 4503
CLOSE_RESUME_REFUSED = 4001  # a resume with the wrong token, like a wrong key
CLOSE_DISPLACED = 1001  # another connection resumed this session
# Redis (or the rate limits' storage on it) is unreachable.
UNAVAILABLE = (RedisError, StorageError)


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
        # Leases this connection took for a session it is still setting up.
        self._leases: tuple[str, ...] = ()
        self._recorder = SessionRecorder()
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
            await self._refuse(
                access_rules.CLOSE_NO_CONFIGURE,
                ErrorCode.BAD_PROTOCOL,
                "protocol must be v1 or voiceide",
            )
            return
        try:
            self._access = await database_sync_to_async(access_rules.authorize_connection)(
                key=query.get("key", ""),
                token=query.get("token", ""),
                origin=origin,
                agent_slug=query.get("agent") or None,
                address=address,
            )
            refusal = await limits.connection_refusal(
                key_id=self._access.key.pk, address=self._access.address
            )
            await database_sync_to_async(quota_gate)(workspace=self._access.workspace)
        except access_rules.ConnectionRefused as refused:
            self._access = None
            await self._refuse(refused.close_code, refused.code, refused.message)
            return
        except UNAVAILABLE:
            await self._unavailable()
            return
        if refusal is not None:
            await self._refuse(access_rules.CLOSE_TOO_MANY, ErrorCode.TOO_MANY_CONNECTIONS, refusal)
            return
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
            await self._release_own_leases()
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
        await self._release_own_leases()

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
        if not await self._acquire_leases():
            return
        channel = await resume.new_channel()
        try:
            plan = await database_sync_to_async(session_plan_build)(
                access=self._access,
                configure=message,
                session_id=self._session_id,
                resume_token=self._resume_token,
                reply_channel=channel or self._channel_name,
            )
        except access_rules.ConnectionRefused as refused:
            await self._release_own_leases()
            await self._refuse(refused.close_code, refused.code, refused.message)
            return
        except ConfigureRefused as refused:
            await self._release_own_leases()  # a corrected configure asks again
            if refused.close_code is None:
                await self._error(refused.code, refused.message)
            else:
                await self._refuse(refused.close_code, refused.code, refused.message)
            return
        self._tasks[0].cancel()  # the configure deadline
        await self._recorder.start(
            session_id=self._session_id,
            access=self._access,
            mode=plan.config.mode,
            agent=plan.agent,
        )
        pools, self._leases = self._leases, ()  # the host keeps them: same session id
        host = self._new_host(channel, self._session_id, pools=pools, key_id=self._access.key.pk)
        session = self._new_session(plan, host, first_seq=self._pre_seq)
        meta = session_meta(
            plan,
            access=self._access,
            token_digest=resume.token_digest(self._resume_token),
            lease_pools=pools,
        )
        await host.begin(
            session,
            tool_runner=plan.tool_runner,
            meta=meta,
            key_expires_at=_epoch(self._access.key.expires_at),
        )
        self._host = host
        await host.attach(self, last_seq=self._pre_seq, resume_token=self._resume_token)
        metrics.session_opened()
        logger.info(
            "session started: workspace=%s mode=%s llm=%s tools=%d",
            self._access.workspace.pk, plan.config.mode, plan.config.llm_name,
            len(plan.config.tools),
        )  # fmt: skip
        await session.start()

    def _new_host(
        self, channel: str, session_id: str, *, pools: tuple[str, ...], key_id: int
    ) -> resume.SessionHost:
        assert self._access is not None
        return resume.SessionHost(
            session_id=session_id,
            workspace_id=self._access.workspace.pk,
            channel=channel,
            recorder=self._recorder,
            lease_pools=pools,
            key_id=key_id,
        )

    def _new_session(
        self, plan: SessionPlan, host: resume.SessionHost, *, first_seq: int
    ) -> VoiceSession:
        return VoiceSession(
            config=plan.config,
            llm=plan.llm,
            stt=plan.stt,
            tts=plan.tts,
            tool_runner=plan.tool_runner,
            emit=host.emit,
            send_audio=host.send_audio,
            on_tool_settled=self._recorder.tool_settled,
            first_seq=first_seq,
            guard=limits.SessionLimits(session_id=plan.config.session_id, key_id=host.key_id),
        )

    # ---------------------------------------------------------------- resuming a session

    async def _resume(self, message: protocol.ResumeMessage) -> None:
        assert self._access is not None
        self._tasks[0].cancel()  # a handover may take a while; the deadline is re-armed on failure
        store = resume.resume_store()
        try:
            stored = await store.load(message.session_id)
        except Exception as exc:
            logger.warning("resume store unavailable: %s", type(exc).__name__)
            stored = None
        # Another workspace's session is "unknown" here, whatever the token.
        if stored is None or stored.meta.get("workspaceId") != self._access.workspace.pk:
            await self._resume_unavailable()
            return
        if not resume.token_matches(message.resume_token, stored.meta.get("tokenDigest", "")):
            await self._refuse(
                CLOSE_RESUME_REFUSED, ErrorCode.RESUME_REFUSED, "the resume token does not match"
            )
            return
        host = resume.local_host(message.session_id)
        if host is not None and host.session and message.last_seq > host.session.last_seq:
            # The client counts events this session never sent: attached, it would hear
            # nothing until the seqs caught up (its own dedupe by seq drops them too).
            await self._resume_unavailable()
            return
        moved = host is None
        if host is None:
            host = await self._take_over(message, stored)
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

    async def _take_over(
        self, message: protocol.ResumeMessage, stored: resume.StoredSession
    ) -> resume.SessionHost | None:
        """Become the owner of a session another process ran (it hands over, or it died),
        then rebuild it here. None: another process got it first, or it cannot be rebuilt."""
        store = resume.resume_store()
        session_id = message.session_id
        try:
            config = session_config_restore(stored.meta, resume_token=message.resume_token)
            channel = await resume.take_over(
                session_id=session_id, store=store, wait_s=resume.handover_wait_s(config)
            )
            latest = await store.load(session_id) if channel is not None else None
            if channel is None or latest is None:
                return None
            events = await store.events_after(session_id, message.last_seq)
            return await self._rebuild(message, latest, events, channel)
        except Exception as exc:
            logger.warning("session %s: taking over failed: %s", session_id, type(exc).__name__)
            return None

    async def _rebuild(
        self,
        message: protocol.ResumeMessage,
        stored: resume.StoredSession,
        events: list[dict[str, Any]],
        channel: str,
    ) -> resume.SessionHost:
        assert self._access is not None
        plan = await database_sync_to_async(session_plan_restore)(
            meta=stored.meta,
            resume_token=message.resume_token,
            reply_channel=channel or self._channel_name,
        )
        self._recorder = SessionRecorder()
        await self._recorder.resume(
            session_id=message.session_id, workspace_id=self._access.workspace.pk
        )
        default_pools = (live.workspace_pool(stored.meta["workspaceId"]),)
        pools = tuple(stored.meta.get("leasePools") or default_pools)
        key_id = int(stored.meta.get("keyId") or self._access.key.pk)
        host = self._new_host(channel, message.session_id, pools=pools, key_id=key_id)
        # Never reuse a seq the client may have seen: the old process may have sent
        # events that its last write did not bring to the store.
        last_seq = max(
            int(stored.state.get("seq", 0)),
            events[-1]["seq"] if events else 0,
            message.last_seq,
        )
        session = self._new_session(plan, host, first_seq=last_seq)
        session.restore(stored.state)
        stops_at = await database_sync_to_async(key_selectors.api_key_stops_at)(
            workspace_id=self._access.workspace.pk, key_id=key_id
        )
        await host.begin(
            session, tool_runner=plan.tool_runner, events=events, key_expires_at=_epoch(stops_at)
        )
        metrics.SESSIONS_LIVE.inc()  # it moved here; the old process counted it until now
        return host

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

    async def _refuse(self, close_code: int, code: ErrorCode, message: str) -> None:
        """Say why in an `error` event (close reasons are dropped by some servers), then close."""
        if self._closing:
            return
        await self._error(code, message)
        self._closing = True
        await self._close(close_code, message[:120])

    async def _flooded(self, code: ErrorCode, message: str) -> None:
        """More than a person or a microphone sends: the session ends, not to be resumed."""
        if self._host is not None:
            await self._host.terminate(code, message, access_rules.CLOSE_TOO_MANY)
        else:
            await self._refuse(access_rules.CLOSE_TOO_MANY, code, message)

    async def _first_message_deadline(self) -> None:
        await asyncio.sleep(settings.CONFIGURE_TIMEOUT_S)
        if self._host is None:
            await self._refuse(
                access_rules.CLOSE_NO_CONFIGURE,
                ErrorCode.CONFIGURE_TIMEOUT,
                f"no configure within {settings.CONFIGURE_TIMEOUT_S:g} s",
            )

    def _limit(self) -> int:
        assert self._access is not None
        workspace = self._access.workspace
        return int(workspace.session_limit or settings.SESSION_LIMIT_PER_WORKSPACE)

    async def _unavailable(self) -> None:
        # Said in words, not a 1011 crash: the page can retry, and nothing was half-made.
        logger.warning("session refused: Redis is unavailable")
        await self._refuse(
            CLOSE_TRY_AGAIN,
            ErrorCode.SERVICE_UNAVAILABLE,
            "the platform cannot start sessions right now; try again in a moment",
        )

    async def _acquire_leases(self) -> bool:
        """A place for the new session from this client address, then in the workspace.
        False: refused (said to the client, the socket closing)."""
        assert self._access is not None
        access = self._access
        by_address = live.address_pool(access.key.pk, access.address)
        if not await live.acquire(
            pool=by_address, session_id=self._session_id, limit=settings.SESSIONS_PER_ADDRESS
        ):
            await self._refuse(
                access_rules.CLOSE_TOO_MANY,
                ErrorCode.TOO_MANY_SESSIONS_FROM_ADDRESS,
                f"this address already has {settings.SESSIONS_PER_ADDRESS} sessions open "
                "with this key",
            )
            return False
        self._leases = (by_address,)
        workspace = live.workspace_pool(access.workspace.pk)
        if not await live.acquire(pool=workspace, session_id=self._session_id, limit=self._limit()):
            await self._release_own_leases()
            await self._refuse(
                access_rules.CLOSE_TOO_MANY,
                ErrorCode.TOO_MANY_SESSIONS,
                f"this workspace already has {self._limit()} sessions open",
            )
            return False
        self._leases = (workspace, by_address)
        return True

    async def _release_own_leases(self) -> None:
        leases, self._leases = self._leases, ()
        for pool in leases:
            with contextlib.suppress(Exception):
                await live.release(pool=pool, session_id=self._session_id)


def _epoch(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None
