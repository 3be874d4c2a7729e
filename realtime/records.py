"""Keeps the database record of a live session, off the event loop.

Observes the events a session emits and writes them in order from one background
task, on a thread of its own, so a slow database never delays audio, events, or the
database reads a turn makes (those share ``database_sync_to_async``'s one thread). A
settled tool call brings its console log along; a call the sandbox ran comes masked (no
secret is decrypted for it here), others are masked with the workspace's secrets,
decrypted once per session. Usage goes the same way: each turn's figures (from its
``metrics`` event) to the session's totals and the day's aggregate, then the workspace's
quotas are checked; a used-up quota is reported back through ``on_quota_exceeded``.
Webhook events are queued once their records are written, and the post-call analysis
once the record is closed; a session that records its audio stores it after that, on a
thread of its own (``sessions_app.recordings``). What a record keeps of what was said
(zero retention, redaction) is the record's own setting, applied by ``sessions_app.services``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from channels.db import database_sync_to_async
from django.db import close_old_connections, connection
from django.dispatch import Signal

from egress.secret_refs import SecretBinding
from engine import protocol
from engine.doors.capture import AudioCapture
from engine.session.config import SettledToolCall
from engine.session.usage import usage_from_wire
from postcall_app import analysis
from realtime.access import Access
from sessions_app import recordings, selectors, services
from sessions_app.models import Agent, AgentVersion, Session
from tools_app.services import secret_bindings, secrets_version
from usage_app import services as usage_services
from webhooks_app import services as webhooks

logger = logging.getLogger(__name__)

# Sent on the writer's thread as a record closes, before ``session.ended`` is queued
# (keyword ``session``); a receiver returns usage to add to the record, or None. The
# doors' figures come this way (``usage_figures.DOOR_FIELDS``): the engine's session does
# not know it was a phone call, the telephony app does.
record_closing = Signal()

# One thread writes the records of every session of this process, in order per session.
_WRITER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="session-records")


Operation = Callable[[], Any]
FollowUp = Callable[[Any], Awaitable[None]] | None
QuotaExceeded = Callable[[str], Awaitable[None]]


class SessionRecorder:
    def __init__(self) -> None:
        self._queue: asyncio.Queue[tuple[Operation, FollowUp] | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._session: Session | None = None
        self._secrets: _SessionSecrets | None = None
        # Both sides of the audio, when the session records it (``DoorAudio`` feeds it).
        self.capture: AudioCapture | None = None
        # Told (with words for the user) when usage just recorded used up a quota.
        self.on_quota_exceeded: QuotaExceeded | None = None

    async def start(
        self,
        *,
        session_id: str,
        access: Access,
        mode: str,
        agent: Agent | None,
        agent_version: AgentVersion | None = None,
        record_audio: bool = False,
    ) -> None:
        """``record_audio``: the served agent records its sessions; the record's privacy
        decides (zero retention never records)."""
        self._session = await database_sync_to_async(services.session_record_start)(
            session_id=session_id,
            workspace=access.workspace,
            api_key=access.key,
            origin=access.origin,
            mode=mode,
            agent=agent,
            end_user=access.end_user,
            agent_version=agent_version,
        )
        if record_audio and mode == "voice" and not self._session.zero_retention:
            self.capture = await asyncio.to_thread(recordings.capture_new)
        self._task = asyncio.create_task(self._write_loop())

    def observe(self, event: protocol.ServerEvent) -> None:
        session = self._session
        if session is None:
            return
        match event:
            case protocol.GreetingEvent(text=text):  # what the user heard first
                greeting = [("assistant", text)]
                self._write(
                    lambda: services.session_record_append(session=session, entries=greeting)
                )
            case protocol.TurnEvent(text=text):
                entries = [("user", text)]
                self._write(
                    lambda: services.session_record_append(session=session, entries=entries)
                )
            case protocol.ChatEvent(text=text):
                replies = [("assistant", text)]
                self._write(
                    lambda: services.session_record_append(session=session, entries=replies)
                )
                self._write(lambda: services.session_record_count(session=session, turns=1))
            case protocol.MetricsEvent() as turn:
                metrics = turn.data()
                self._write(lambda: services.session_record_turn(session=session, metrics=metrics))
                self.record_usage(usage_from_wire(turn.usage))
            case protocol.CancelledEvent() if self.capture is not None:
                self.capture.cut()  # the peer dropped what it had not played
            case protocol.ToolStatusEvent(status=status) if status.final:
                self._write(lambda: services.session_record_count(session=session, tool_calls=1))

    def tool_settled(self, call: SettledToolCall) -> None:
        """The session's ``on_tool_settled``: keep the call and its console log."""
        session = self._session
        if session is None:
            return
        secrets = self._secrets_of(session)

        def write() -> None:
            if call.log:
                services.session_record_tool_log(
                    workspace_id=session.workspace_id,
                    session_id=session.public_id.hex,
                    tool_name=call.name,
                    console=call.log,
                )
            record = services.session_record_tool_call(
                session=session,
                call_id=call.call_id,
                name=call.name,
                arguments=call.arguments,
                status=call.status,
                result=call.result,
                error=call.error,
                duration_ms=call.duration_ms,
                bindings=[] if call.masked else secrets.bindings(),
            )
            if call.status.failed:
                webhooks.tool_call_failed_emit(session=session, call=record)

        self._write(write)

    def provider_error(self, code: str, detail: str) -> None:
        """The session's ``on_provider_error``: keep the detail (its keys masked by the
        session) for its page, the workspace's secrets masked here, off the event loop."""
        session = self._session
        if session is None:
            return
        secrets = self._secrets_of(session)
        self._write(
            lambda: services.session_record_error(
                session=session, code=code, detail=detail, bindings=secrets.bindings()
            )
        )

    def _secrets_of(self, session: Session) -> _SessionSecrets:
        """The session's secrets, decrypted on the writer thread when first needed."""
        if self._secrets is None:
            self._secrets = _SessionSecrets(session.workspace_id)
        return self._secrets

    def record_usage(self, usage: dict[str, int], *, ended: bool = False) -> None:
        """Add a usage delta (a turn's, or what came after the last turn) to the record."""
        session = self._session
        if session is None:
            return

        def write() -> str | None:
            usage_services.usage_record(session=session, usage=usage, ended=ended)
            return usage_services.quota_check(workspace_id=session.workspace_id)

        self._write(write, then=self._quota_checked)

    async def _quota_checked(self, exceeded: str | None) -> None:
        if exceeded is not None and self.on_quota_exceeded is not None:
            await self.on_quota_exceeded(exceeded)

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
        self._store_recording()  # what was heard here; the new process does not record
        self._session, self._task = None, None

    async def finish(self, close_code: int | None, usage: dict[str, int] | None = None) -> None:
        """Close the record: ``usage`` is what the session consumed after its last turn."""
        session = self._session
        if session is None or self._task is None:
            return
        self.on_quota_exceeded = None  # nothing left to end
        self.record_usage(usage or {}, ended=True)

        def write() -> None:
            for _, extra in record_closing.send_robust(sender=Session, session=session):
                if isinstance(extra, dict):
                    usage_services.usage_record(session=session, usage=extra)
            services.session_record_end(session=session, close_code=close_code)
            webhooks.session_ended_emit(session_id=session.pk, workspace_id=session.workspace_id)
            analysis.analysis_request(session=session)  # off the hot path (postcall_app)

        self._write(write)
        self._queue.put_nowait(None)
        await self._task
        self._store_recording()

    def _store_recording(self) -> None:
        """Seal and store the recording off the session's path (a long one takes a while):
        the session's leases and its end do not wait for it."""
        capture, session, self.capture = self.capture, self._session, None
        if capture is None or session is None:
            return
        task = asyncio.create_task(_recording_store(session, capture))
        _storing.add(task)
        task.add_done_callback(_storing.discard)

    def _write(self, operation: Operation, then: FollowUp = None) -> None:
        """Queue ``operation`` (run in a thread); ``then`` gets its result on the loop."""
        self._queue.put_nowait((operation, then))

    async def _write_loop(self) -> None:
        # Everything queued by then goes to the writer thread in one hop (a turn's
        # transcript, reply, counts and usage come together), still in order.
        stopped = False
        while not stopped:
            batch, stopped = await self._queued()
            if batch:
                await self._write_batch(batch)

    async def _queued(self) -> tuple[list[tuple[Operation, FollowUp]], bool]:
        """What is queued now, up to the end mark (None); whether the mark came."""
        batch: list[tuple[Operation, FollowUp]] = []
        item = await self._queue.get()
        while item is not None:
            batch.append(item)
            if self._queue.empty():
                return batch, False
            item = self._queue.get_nowait()
        return batch, True

    async def _write_batch(self, batch: list[tuple[Operation, FollowUp]]) -> None:
        operations = [operation for operation, _ in batch]
        try:
            results = await asyncio.get_running_loop().run_in_executor(
                _WRITER, _in_writer, operations
            )
        except Exception as exc:  # the executor itself (shut down at exit)
            logger.error("session record write failed: %s", type(exc).__name__)
            return
        for (_, then), result in zip(batch, results, strict=True):
            if isinstance(result, _Failed):
                # The type only: database errors can quote the row (transcript text).
                logger.error("session record write failed: %s", result.error)
            elif then is not None:
                try:
                    await then(result)
                except Exception as exc:
                    logger.error("session record write failed: %s", type(exc).__name__)


# Recordings being sealed and stored, each on a thread of ``_STORER`` (kept referenced).
_STORER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="session-recordings")
_storing: set[asyncio.Task[None]] = set()


def _stored(session: Session, capture: AudioCapture) -> None:
    try:
        recordings.recording_store(session=session, capture=capture)
    finally:
        connection.close()  # rare and long: no connection kept open by an idle thread


async def _recording_store(session: Session, capture: AudioCapture) -> None:
    try:
        await asyncio.get_running_loop().run_in_executor(_STORER, _stored, session, capture)
    except Exception as exc:
        logger.error("session recording not stored: %s", type(exc).__name__)


async def recordings_stored() -> None:
    """Wait for the recordings being stored (a draining process, tests)."""
    while _storing:
        await asyncio.gather(*list(_storing), return_exceptions=True)


class _Failed:
    """An operation that raised: its error's type, never its text."""

    def __init__(self, error: str) -> None:
        self.error = error


def _in_writer(operations: list[Operation]) -> list[Any]:
    # What database_sync_to_async does around a call: no connection that broke or aged out.
    close_old_connections()
    results: list[Any] = []
    try:
        for operation in operations:
            try:
                results.append(operation())
            except Exception as exc:  # the next operations still run, in order
                results.append(_Failed(type(exc).__name__))
                close_old_connections()  # a connection the error broke is not reused
    finally:
        close_old_connections()
    return results


class _SessionSecrets:
    """The workspace's secrets, for masking calls the sandbox did not mask (client tools,
    calls refused before they ran): decrypted at the first such call of the session, and
    again only once the workspace's secrets changed. Used on the writer thread only."""

    def __init__(self, workspace_id: int) -> None:
        self._workspace_id = workspace_id
        self._version: tuple[int, Any] | None = None
        self._bindings: list[SecretBinding] = []

    def bindings(self) -> list[SecretBinding]:
        version = secrets_version(workspace_id=self._workspace_id)
        if version != self._version:
            self._bindings = secret_bindings(workspace_id=self._workspace_id)
            self._version = version
        return self._bindings
