"""A session's home in this process: it outlives the sockets that come and go.

The host owns the ``VoiceSession`` and what it needs outside the orchestrator: the
session's record, its lease on the workspace's session limit, its channel (tool results
from sandbox workers, handover requests from other web processes), and its copy of the
outgoing events in the resume store. A socket is a ``Sink`` attached to it.

- Unclean disconnect: the host stays, detached, for ``SESSION_RESUME_TTL``; the session
  goes on with a running turn or tool call and its events are logged, not sent.
- ``resume`` on this process: ``attach`` sends what the client missed, then goes live.
- ``resume`` on another process: that process asks this host to hand over; the host
  lets the turn and running server tools finish (within their deadlines), writes the
  final snapshot, and stops without ending the session or its record.
- Clean close, or the TTL passes: ``end``: the session, its record and its state end.
- The workspace ends it (its key is revoked or expires, or someone presses "End"), or it
  sits idle or runs past its maximum length: ``terminate`` says why in an ``error``
  event, closes the socket with the reason's code and ends the session. The host hears of
  the first two through channel-layer groups (one per key, one per session), so the web
  process the session runs on need not be the one where the key was revoked.

Store writes are batched by one task per host, so neither audio nor events wait for
Redis; a state snapshot rides along whenever an event that changes state was emitted,
carrying of the history only what changed since the last write (``snapshot``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from collections import deque
from collections.abc import Coroutine
from typing import Any, Literal, Protocol

from channels.layers import get_channel_layer
from django.conf import settings

from core import channel_messages, leases
from core.channel_messages import (
    SessionEnd,
    SessionHandover,
    SessionHandoverAck,
    SessionHandoverDone,
    SessionKeyExpires,
    SessionSay,
    ToolResultDelivery,
)
from engine import metrics, protocol, tracing
from engine.doors.capture import AudioCapture
from engine.protocol import CloseCode, ErrorCode
from engine.resume.snapshot import SnapshotWriter
from engine.resume.store import EVENTS_KEPT, ResumeStore
from engine.session import SERVER_TOOL_GRACE_S, SessionConfig, VoiceSession
from engine.tools.runner import ToolRunner
from realtime.records import SessionRecorder
from realtime.resume.store import resume_store

logger = logging.getLogger(__name__)

OWNER_TTL_S = 15.0  # a killed process's sessions can be taken over after this
KEEP_EVERY_S = 5.0
# Usage is recorded after each turn, and at least this often: a long silence streamed to the
# recogniser counts toward the voice-minutes quota before the next turn.
USAGE_EVERY_S = 60.0
TURN_SETTLE_S = 10.0  # how long a handover waits for a turn without server tools
# Events after which the snapshot is written again.
STATE_EVENTS = (
    protocol.ReadyEvent, protocol.GreetingEvent, protocol.TurnEvent, protocol.ToolCallEvent,
    protocol.ToolStatusEvent, protocol.ChatEvent, protocol.CancelledEvent,
    protocol.ResetEvent, protocol.MetricsEvent,
)  # fmt: skip

# Sessions run by this process, by id. Module level on purpose: a session outlives the
# connection (and consumer) that started it, and a resume on this process finds it here.
_hosts: dict[str, SessionHost] = {}
# Tasks nothing else holds (a handover, a cleanup that outlives its consumer).
_unowned: set[asyncio.Task[Any]] = set()


WATCH_EVERY_S = 1.0


class Sink(Protocol):
    """A socket a session is attached to. One with ``movable`` true (a browser's) is told
    to ``reconnect`` when this process drains; without it, it is left to finish."""

    async def send_event(self, event: protocol.Stamped) -> None: ...

    async def send_audio(self, pcm: bytes) -> None: ...

    async def displace(self) -> None:
        """Another connection resumed the session: close this one."""

    async def terminate(self, close_code: int, reason: str) -> None:
        """The session ended (the client was told why): close the socket with this code."""


def _typed(events: list[dict[str, Any]]) -> list[protocol.Stamped]:
    """Events a store kept, typed again; one this process cannot read is left out."""
    typed = []
    for wire in events:
        if wire.get("type") == protocol.ReadyEvent.TYPE:  # kept without its token
            wire = {"resumeToken": "", **wire}
        try:
            typed.append(protocol.Stamped.from_wire(wire))
        except (ValueError, TypeError, KeyError):
            logger.warning("resume store: an event of type %.40r was unreadable", wire.get("type"))
    return typed


def _stored(event: protocol.Stamped) -> dict[str, Any]:
    """An event as the store keeps it: ``ready`` without its resume token."""
    wire = event.to_wire()
    if isinstance(event.event, protocol.ReadyEvent):
        del wire["resumeToken"]
    return wire


def key_group(key_id: int) -> str:
    """The channel-layer group of every live session opened with this key."""
    return f"voice-key-{key_id}"


def session_group(session_id: str) -> str:
    return f"voice-session-{session_id}"


def local_host(session_id: str) -> SessionHost | None:
    return _hosts.get(session_id)


def hosts_live() -> list[SessionHost]:
    """The sessions this process runs now."""
    return list(_hosts.values())


def hosts_busy() -> bool:
    """Sessions run here, or handovers and clean-ups of sessions are still under way."""
    return bool(_hosts) or any(not task.done() for task in _unowned)


async def hosts_end_all(close_code: int | None = None) -> None:
    """End every session of this process (tests, shutdown)."""
    for host in list(_hosts.values()):
        await host.end(close_code)


def _run_unowned(coroutine: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
    task = asyncio.create_task(coroutine, name=name)
    _unowned.add(task)
    task.add_done_callback(_unowned.discard)
    return task


async def shielded(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run ``coroutine`` to its end even if the caller is cancelled: a consumer that the
    server cancels (at shutdown, or after its close timeout) must still end or detach
    its session, else the session's state and record would be left half done."""
    await asyncio.shield(_run_unowned(coroutine, "session-host cleanup"))


async def new_channel() -> str:
    """A channel of this process for one session (tool results, handover requests)."""
    layer = get_channel_layer()
    return await layer.new_channel() if layer is not None else ""


def handover_wait_s(config: SessionConfig) -> float:
    """How long a handover may take: the turn, or the slowest server tool, finishing."""
    deadlines = [
        (tool.timeout_s or config.client_tool_timeout) + SERVER_TOOL_GRACE_S
        for tool in config.tools
        if not tool.client
    ]
    return max([TURN_SETTLE_S, *deadlines])


def attached_ttl() -> float:
    # While a socket is attached the state is renewed; a killed process's sessions then
    # stay resumable for about SESSION_RESUME_TTL after its last renewal.
    return float(settings.SESSION_RESUME_TTL) + OWNER_TTL_S


class SessionHost:
    def __init__(
        self,
        *,
        session_id: str,
        workspace_id: int,
        channel: str,
        recorder: SessionRecorder,
        store: ResumeStore | None = None,
        lease_pools: tuple[str, ...] | None = None,
        key_id: int = 0,
    ) -> None:
        self.session_id, self.workspace_id, self.channel = session_id, workspace_id, channel
        self.key_id = key_id
        self.lease_pools = lease_pools or (leases.workspace_pool(workspace_id),)
        self._key_expires_at: float | None = None  # epoch; the key stops working then
        self.session: VoiceSession | None = None
        self._recorder = recorder
        self._store = store or resume_store()
        self._tool_runner: ToolRunner | None = None
        self._state: Literal["new", "running", "handing_over", "moved", "ended"] = "new"
        self._sink: Sink | None = None
        self._sent_seq = 0
        self._send_lock = asyncio.Lock()  # replay and live events go out in seq order
        # The events kept for a resume, as the store keeps them: (seq, JSON). Text, not
        # the event objects: the collector does not track a tuple of an int and a str,
        # so up to EVENTS_KEPT events a session add nothing to its full collections.
        self._log: deque[tuple[int, str]] = deque(maxlen=EVENTS_KEPT)
        self._unwritten: list[tuple[int, str]] = []
        self._dirty = False
        self._snapshots = SnapshotWriter()
        self._wake = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._expiry: asyncio.Task[None] | None = None
        self._detached_code: int | None = None
        self._detached_until: float | None = None  # loop time
        self._handover_replies: list[str] = []
        self._handover: asyncio.Task[None] | None = None
        self._stopping = False
        self._quota_ending = False
        self._trace = tracing.NO_TRACE

    @property
    def sink(self) -> Sink | None:
        return self._sink

    @property
    def capture(self) -> AudioCapture | None:
        """The session's recording, which the door's audio feeds (None: not recorded)."""
        return self._recorder.capture

    # ---------------------------------------------------------------- lifecycle

    async def begin(
        self,
        session: VoiceSession,
        *,
        tool_runner: ToolRunner,
        meta: dict[str, Any] | None = None,
        events: list[dict[str, Any]] | None = None,
        key_expires_at: float | None = None,
    ) -> None:
        """Run ``session`` here: a new one (``meta`` given) or one taken over (``events``:
        what it sent before, for clients that missed some). ``key_expires_at``: when the
        session's key stops working (epoch), if it was rolled with a grace period."""
        self.session, self._tool_runner = session, tool_runner
        self._key_expires_at = key_expires_at
        self._log.extend((int(wire["seq"]), json.dumps(wire)) for wire in events or [])
        self._state = "running"
        _hosts[self.session_id] = self
        self._recorder.on_quota_exceeded = self._quota_exceeded
        self._trace = tracing.tracer().session(
            self.session_id,
            {"workspace.id": self.workspace_id, "voice.mode": session.config.mode,
             "voice.resumed": meta is None},
        )  # fmt: skip
        try:
            if meta is not None:
                first = self._snapshots.next(session.snapshot())
                await self._store.create(
                    self.session_id,
                    meta=json.dumps(meta),
                    state=first.state,
                    grown=first.grown,
                    ttl=attached_ttl(),
                )
            else:
                for pool in self.lease_pools:
                    await leases.adopt(pool=pool, session_id=self.session_id)
        except Exception as exc:  # the session works; only resuming it may not
            self._snapshots.forget()
            logger.error("session %s: resume store failed: %s", self.session_id, type(exc).__name__)
        await self._groups("group_add")
        self._tasks = [
            asyncio.create_task(self._write_loop(), name="session-host writer"),
            asyncio.create_task(self._keep(), name="session-host keeper"),
            asyncio.create_task(self._watch(), name="session-host watch"),
        ]
        if self.channel:
            self._tasks.append(asyncio.create_task(self._listen(), name="session-host channel"))

    async def attach(self, sink: Sink, *, last_seq: int, resume_token: str) -> bool:
        """Send ``sink`` every logged event after ``last_seq``, then the live ones.

        False: the session is no longer here (it ended, or another process took it).
        """
        if self._state != "running":
            return False
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        self._detached_until = None
        async with self._send_lock:
            previous, self._sink = self._sink, None
            if previous is not None and previous is not sink:
                with contextlib.suppress(Exception):
                    await previous.displace()
            missed = _typed([json.loads(text) for seq, text in self._log if seq > last_seq])
            if missed and missed[0].seq > last_seq + 1 and last_seq > 0:
                logger.warning(
                    "session %s: %d events were no longer kept for the resume",
                    self.session_id, missed[0].seq - last_seq - 1,
                )  # fmt: skip
            self._sent_seq = last_seq
            for event in missed:
                if isinstance(event.event, protocol.ReadyEvent):  # logged without its token
                    ready = dataclasses.replace(event.event, resume_token=resume_token)
                    event = dataclasses.replace(event, event=ready)
                await self._deliver(sink, event)
            self._sink = sink
        try:
            await self._store.expire(self.session_id, attached_ttl())
        except Exception as exc:
            logger.warning("session %s: resume store: %s", self.session_id, type(exc).__name__)
        return True

    async def disconnected(self, sink: Sink, close_code: int | None, *, clean: bool) -> None:
        """``sink``'s socket closed: a clean close ends the session, else it waits for resume."""
        if self._sink is not sink or self._state != "running":
            return  # displaced by a resume, or moved on already
        if clean:
            await self.end(close_code)
            return
        self._sink = None
        self._detached_code = close_code
        ttl = float(settings.SESSION_RESUME_TTL)
        if ttl <= 0:
            await self.end(close_code)
            return
        self._detached_until = asyncio.get_running_loop().time() + ttl
        self._expiry = asyncio.create_task(self._expire_after(ttl), name="session-host expiry")
        self._dirty = True  # a write with state: every key's expiry becomes the resume TTL
        await self.flush()

    async def end(self, close_code: int | None) -> None:
        """The session is over for good: nothing can resume it."""
        if self._state in ("ended", "moved"):
            return
        self._state = "ended"
        if _hosts.get(self.session_id) is self:
            del _hosts[self.session_id]
        self._sink = None
        # A write under way lands first (cancelled, the Redis client may still finish it,
        # after the delete: an ended session's state back in the store), then none follows.
        async with self._write_lock:
            self._stop_tasks()
            self._unwritten, self._dirty = [], False
            try:
                await self._store.delete(self.session_id)
            except Exception as exc:
                logger.warning("session %s: resume store: %s", self.session_id, type(exc).__name__)
        usage = None
        if self.session is not None:
            await self.session.close()
            usage = self.session.take_usage()
        await self._recorder.finish(close_code, usage)
        metrics.session_closed(close_code)
        self._trace.end(close_code)
        for pool in self.lease_pools:
            with contextlib.suppress(Exception):
                await leases.release(pool=pool, session_id=self.session_id)
        await self._groups("group_discard")

    def _resumable_elsewhere(self) -> bool:
        """A browser (it reconnects), or a session waiting for its client to come back;
        not a phone call, whose carrier's stream cannot reconnect."""
        return self._sink is None or bool(getattr(self._sink, "movable", False))

    async def drain(self) -> None:
        """This process is shutting down: a client that can reconnect is told to, and its
        ``resume`` on another process takes the session over (``_hand_over``). A session
        whose socket is gone (dropped, or cut for a message past daphne's size) has no one
        to tell: it is saved for a resume anywhere now rather than holding the drain until
        its grace period ends. A phone call is left to finish."""
        if self._state != "running" or self.session is None:
            return
        if self._sink is None:
            self._state = "handing_over"
            self._handover = _run_unowned(self._hand_over(), "session-host handover")
        elif self._resumable_elsewhere():
            await self.session.ask_to_reconnect()

    async def drain_ended(self, within_s: float) -> None:
        """The drain's grace period ended with the session still here. One that can resume
        is saved for a ``resume`` anywhere (as a handover does, without waiting for a
        taker); a phone call ends, its record saying the platform restarted."""
        if self._state != "running":
            return
        if self._resumable_elsewhere():
            self._state = "handing_over"
            await self._hand_over(within_s)
        else:
            await self.terminate(
                ErrorCode.SERVICE_UNAVAILABLE, "the platform restarted", CloseCode.RESTART
            )

    async def terminate(self, code: ErrorCode, message: str, close_code: int) -> None:
        """End the session for a reason the client is told (``error`` ``code``), closing its
        socket with ``close_code``. Nothing can resume it."""
        if self._state != "running":
            return
        if self.session is not None:
            await self.session.handle_error(code, message)
        sink, self._sink = self._sink, None
        if sink is not None:
            with contextlib.suppress(Exception):
                await sink.terminate(close_code, message)
        logger.info("session %s ended: %s", self.session_id, code)
        await self.end(close_code)

    async def _groups(self, action: Literal["group_add", "group_discard"]) -> None:
        layer = get_channel_layer()
        if layer is None or not self.channel:
            return
        groups = [session_group(self.session_id)]
        if self.key_id:
            groups.append(key_group(self.key_id))
        for group in groups:
            try:
                await getattr(layer, action)(group, self.channel)
            except Exception as exc:  # ending by key or by id may then miss this session
                logger.warning("session %s: %s: %s", self.session_id, action, type(exc).__name__)

    async def _watch(self) -> None:
        """End the session when it sits idle, runs too long, or its key expires."""
        while not self._stopping:
            await asyncio.sleep(WATCH_EVERY_S)
            reason = self._overdue()
            if reason is not None:
                _run_unowned(self.terminate(*reason), "session-host terminate")
                return

    def _overdue(self) -> tuple[ErrorCode, str, int] | None:
        session = self.session
        if session is None or self._state != "running":
            return None
        config, now = session.config, time.time()
        if self._key_expires_at is not None and now >= self._key_expires_at:
            return ErrorCode.KEY_EXPIRED, "this session's API key expired", CloseCode.BAD_KEY
        if config.max_duration_s and now - config.started_at >= config.max_duration_s:
            limit = f"{config.max_duration_s / 60:g} minutes"
            return (
                ErrorCode.SESSION_TOO_LONG,
                f"sessions last at most {limit}",
                CloseCode.TOO_LONG,
            )
        if config.idle_timeout_s and session.idle_s >= config.idle_timeout_s:
            return (
                ErrorCode.SESSION_IDLE,
                f"nothing was said or typed for {config.idle_timeout_s:g} s",
                CloseCode.IDLE,
            )
        return None

    async def _quota_exceeded(self, message: str) -> None:
        """The workspace used up a quota: say so, let the running turn finish (and be
        heard), then end the session. Returns at once (the record writer calls it)."""
        if self._state != "running" or self._quota_ending or self.session is None:
            return
        self._quota_ending = True
        await self.session.refuse_turns(message)
        _run_unowned(self._end_after_turn(message), "session-host quota end")

    async def _end_after_turn(self, message: str) -> None:
        assert self.session is not None
        await self.session.current_turn_done(handover_wait_s(self.session.config))
        sink, self._sink = self._sink, None  # its close is not a disconnect to wait out
        if sink is not None and self._state == "running":
            with contextlib.suppress(Exception):
                await sink.terminate(CloseCode.QUOTA_EXCEEDED, message)
        await self.end(CloseCode.QUOTA_EXCEEDED)

    async def _expire_after(self, ttl: float) -> None:
        await asyncio.sleep(ttl)
        self._expiry = None  # end() must not cancel the task it runs in
        await self.end(self._detached_code)

    def _stop_tasks(self) -> None:
        # Not awaited: the async Redis client can swallow a cancellation that lands inside
        # a command, so each loop also checks ``_stopping`` and leaves at its next turn.
        self._stopping = True
        self._wake.set()
        current = asyncio.current_task()
        tasks = [task for task in (*self._tasks, self._expiry) if task is not None]
        self._tasks, self._expiry = [], None
        for task in tasks:
            if task is not current:
                task.cancel()

    # ---------------------------------------------------------------- from the session

    async def emit(self, event: protocol.Stamped) -> None:
        self._recorder.observe(event.event)
        metrics.observe_event(event.event)
        self._trace.observe(event)
        logged = (event.seq, json.dumps(_stored(event)))  # ASCII JSON (see SnapshotWriter)
        self._log.append(logged)
        self._unwritten.append(logged)
        if isinstance(event.event, STATE_EVENTS):
            self._dirty = True
        self._wake.set()
        async with self._send_lock:
            if self._sink is not None:
                await self._deliver(self._sink, event)

    async def send_audio(self, pcm: bytes) -> None:
        sink = self._sink
        if sink is not None:  # audio is never logged nor replayed
            await sink.send_audio(pcm)

    async def _deliver(self, sink: Sink, event: protocol.Stamped) -> None:
        if event.seq <= self._sent_seq:
            return  # replayed already
        self._sent_seq = event.seq
        try:
            await sink.send_event(event)
        except Exception as exc:  # a socket that just went away; the event is logged
            logger.debug("session %s: send failed: %s", self.session_id, type(exc).__name__)

    # ---------------------------------------------------------------- from the client

    async def handle(self, message: protocol.ClientMessage) -> None:
        assert self.session is not None
        await self.session.handle(message)
        if isinstance(message, protocol.ContextMessage):  # changes state, emits nothing
            self._dirty = True
            self._wake.set()

    def tool_result(self, delivery: ToolResultDelivery) -> None:
        """A sandbox worker's result, for the tool runner waiting on it."""
        if self._tool_runner is not None:
            self._tool_runner.resolve(delivery.call_id, delivery.result)

    # ---------------------------------------------------------------- the store

    def _ttl(self) -> float:
        if self._detached_until is None:
            return attached_ttl()
        return max(0.001, self._detached_until - asyncio.get_running_loop().time())

    async def flush(self) -> None:
        """Write the logged events and, if it changed, the state (one round trip)."""
        async with self._write_lock:
            events, self._unwritten = self._unwritten, []
            dirty, self._dirty = self._dirty, False
            if not events and not dirty:
                return
            snapshot, written = None, False
            try:
                # Taken at once, in this step of the loop: the snapshot refers to the
                # session's live history.
                if dirty and self.session is not None:
                    snapshot = self._snapshots.next(self.session.snapshot())
                await self._store.write(
                    self.session_id,
                    events=events,
                    state=snapshot.state if snapshot else None,
                    grown=snapshot.grown if snapshot else None,
                    ttl=self._ttl(),
                )
                written = True
            except Exception as exc:  # the session goes on; a resume may miss this much
                logger.warning(
                    "session %s: resume store write failed: %s", self.session_id,
                    type(exc).__name__,
                )  # fmt: skip
            finally:
                if snapshot is not None and not written:  # (also cancelled mid-write)
                    self._snapshots.forget()

    async def _write_loop(self) -> None:
        while not self._stopping:
            await self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            await self.flush()

    async def _keep(self) -> None:
        loop = asyncio.get_running_loop()
        renewed_at = usage_at = loop.time()
        while not self._stopping:
            if loop.time() - usage_at >= USAGE_EVERY_S:
                self._record_usage()
                usage_at = loop.time()
            try:
                attached = self._sink is not None
                await self._store.keep(
                    self.session_id,
                    owner=self.channel,
                    owner_ttl=OWNER_TTL_S,
                    ttl=attached_ttl() if attached else None,
                )
                if loop.time() - renewed_at >= leases.LEASE_S / 3:
                    for pool in self.lease_pools:
                        await leases.renew(pool=pool, session_id=self.session_id)
                    renewed_at = loop.time()
            except Exception as exc:
                logger.warning("session %s: keeping: %s", self.session_id, type(exc).__name__)
            await asyncio.sleep(KEEP_EVERY_S)

    def _record_usage(self) -> None:
        usage = self.session.take_usage() if self.session is not None else {}
        if any(usage.values()):
            self._recorder.record_usage(usage)

    # ---------------------------------------------------------------- the channel

    async def _listen(self) -> None:
        layer = get_channel_layer()
        assert layer is not None  # self.channel is one of its channels
        while not self._stopping:
            try:
                message = await layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("session %s: channel: %s", self.session_id, type(exc).__name__)
                await asyncio.sleep(1)
                continue
            match channel_messages.decode(message):
                case ToolResultDelivery() as delivery:
                    self.tool_result(delivery)
                case SessionEnd() as end:
                    _run_unowned(self._ended_by_workspace(end), "session-host terminate")
                case SessionKeyExpires(at=at):
                    self._key_expires_at = at
                case SessionSay(text=text, then_end_call=then_end_call):
                    if self.session is not None:
                        speaking = self.session.speak(text, then_end_call=then_end_call)
                        _run_unowned(speaking, "session-host say")
                case SessionHandover(reply_channel=reply):
                    self._handover_replies.append(reply)
                    with contextlib.suppress(Exception):
                        await layer.send(reply, channel_messages.encode(SessionHandoverAck()))
                    if self._state == "running":
                        self._state = "handing_over"
                        self._handover = _run_unowned(self._hand_over(), "session-host handover")

    async def _ended_by_workspace(self, end: SessionEnd) -> None:
        if end.reason == "key_revoked":
            await self.terminate(
                ErrorCode.KEY_REVOKED, "this session's API key was revoked", CloseCode.BAD_KEY
            )
        else:
            await self.terminate(
                ErrorCode.SESSION_ENDED, "the workspace ended this session", CloseCode.ENDED
            )

    async def _hand_over(self, within_s: float | None = None) -> None:
        """Another process resumes this session: finish what runs (for at most
        ``within_s``, when given), save, stop here."""
        assert self.session is not None
        if _hosts.get(self.session_id) is self:
            del _hosts[self.session_id]
        await self._groups("group_discard")
        try:
            if self._expiry is not None:
                self._expiry.cancel()
                self._expiry = None
            sink, self._sink = self._sink, None
            if sink is not None:
                with contextlib.suppress(Exception):
                    await sink.displace()
            wait_s = handover_wait_s(self.session.config)
            await self.session.settle(wait_s if within_s is None else min(wait_s, within_s))
            self._dirty = True
            await self.flush()
            await self.session.close()
            self._record_usage()
            await self._recorder.pause()
            metrics.SESSIONS_LIVE.dec()  # it lives on in the process that took it over
        except Exception as exc:
            logger.error("session %s: handover: %s", self.session_id, type(exc).__name__)
        finally:
            self._state = "moved"
            self._trace.end(None, moved=True)
            layer = get_channel_layer()
            if layer is not None:  # the handover requests came through it
                for reply in self._handover_replies:
                    with contextlib.suppress(Exception):
                        await layer.send(reply, channel_messages.encode(SessionHandoverDone()))
            self._stop_tasks()
