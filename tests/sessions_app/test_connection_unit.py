"""The connection's parts on their own: a Connection with list sockets and the handshake
stubbed (no consumer, no database), the session-limit places, and the resume lookups."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from core import leases as live
from engine import protocol
from engine.doors.browser import BrowserDoor
from engine.doors.door import Door
from engine.protocol import CloseCode, ErrorCode
from engine.resume.store import MemoryResumeStore
from realtime import access as access_rules
from realtime import resume
from realtime.connection import Connection, Refusal, handshake, resuming, starting
from realtime.connection import setup_leases as places_module
from realtime.connection.setup_leases import SetupLeases as Places
from secrets_app.models import ApiKey, Workspace
from tests.sessions_app.harness import until


def unsaved_access(*, workspace_id: int = 7, limit: int = 0, address: str = "") -> Any:
    workspace = Workspace(pk=workspace_id, name="w", session_limit=limit)
    key = ApiKey(pk=workspace_id * 1000 + 1, workspace=workspace)
    return access_rules.Access(
        key=key, workspace=workspace, origin="", agent=None, address=address or uuid.uuid4().hex
    )


class Socket:
    """What a consumer would send, and how it closed."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.closed_with: tuple[int, str] | None = None
        door = BrowserDoor(
            send_text=self._send_text, send_bytes=self._send_bytes, close=self._close
        )
        self.connection = Connection(door=door)

    async def _send_text(self, text: str) -> None:
        self.sent.append(json.loads(text))

    async def _send_bytes(self, data: bytes) -> None:
        raise AssertionError("no audio before a session")

    async def _close(self, code: int, reason: str) -> None:
        self.closed_with = (code, reason)

    def codes(self) -> list[str]:
        return [event["code"] for event in self.sent if event["type"] == "error"]

    async def send(self, message: dict[str, Any]) -> None:
        await self.connection.receive_text(json.dumps(message))


@pytest.fixture
def admitted(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """Make the handshake answer ``answer`` (an Access, a Refusal, or an exception)."""

    def answer_with(answer: Any) -> None:
        async def admit(**_: Any) -> Any:
            if isinstance(answer, Exception):
                raise answer
            return answer

        monkeypatch.setattr(handshake, "admit", admit)

    return answer_with


async def opened(*, query: dict[str, str] | None = None) -> Socket:
    socket = Socket()
    await socket.connection.open(credentials=query or {}, origin=None)
    return socket


async def test_an_unknown_protocol_is_refused_before_the_key_is_read() -> None:
    socket = await opened(query={"protocol": "v9"})
    assert socket.codes() == ["bad_protocol"]
    assert socket.closed_with == (
        CloseCode.NO_CONFIGURE,
        "protocol must be v1 or voiceide",
    )


async def test_a_refused_handshake_says_why_and_closes(admitted: Callable[..., Any]) -> None:
    admitted(Refusal(CloseCode.ORIGIN, ErrorCode.ORIGIN_NOT_ALLOWED, "not from here"))
    socket = await opened()
    assert socket.codes() == ["origin_not_allowed"]
    assert socket.closed_with == (CloseCode.ORIGIN, "not from here")
    await socket.send({"type": "ping"})  # a refused socket answers nothing more
    assert len(socket.sent) == 1


async def test_redis_down_at_the_handshake_is_a_try_again(admitted: Callable[..., Any]) -> None:
    admitted(RedisConnectionError("down"))
    socket = await opened()
    assert socket.codes() == ["service_unavailable"]
    assert socket.closed_with is not None and socket.closed_with[0] == CloseCode.TRY_AGAIN


async def test_before_configure_pings_are_answered_and_the_rest_refused(
    admitted: Callable[..., Any],
) -> None:
    admitted(unsaved_access())
    socket = await opened()
    await socket.send({"type": "ping", "t": 12.5})
    await socket.send({"type": "text", "text": "hello"})
    await socket.connection.audio(b"\0" * 640)
    await socket.connection.audio(b"\0" * (protocol.BINARY_FRAME_MAX + 1))
    assert [e["type"] for e in socket.sent] == ["pong", "error", "error", "error"]
    assert socket.sent[0]["t"] == 12.5
    assert socket.codes() == ["not_configured", "not_configured", "frame_too_large"]
    assert [e["seq"] for e in socket.sent] == [1, 2, 3, 4]  # numbered ahead of the session
    assert socket.closed_with is None
    await socket.connection.closed(1000)


class _LineDoor(Door):
    """A door that cannot resume (as a carrier's stream), its events kept typed."""

    name = "line"

    def __init__(self) -> None:
        self.events: list[protocol.ServerEvent] = []

    async def send_event(self, event: protocol.Stamped) -> None:
        self.events.append(event.event)

    async def send_audio(self, audio: bytes) -> None:
        raise AssertionError("no audio before a session")

    async def close(self, code: int, reason: str) -> None:
        pass


async def test_a_door_that_cannot_resume_refuses_resume_in_words(
    admitted: Callable[..., Any],
) -> None:
    admitted(unsaved_access())
    door = _LineDoor()
    connection = Connection(door=door)
    await connection.open(credentials={"token": "st_x"}, origin=None)
    resume_message = protocol.ResumeMessage(session_id="a" * 32, resume_token="r", last_seq=0)
    await connection.control(resume_message)
    await connection.control(protocol.PingMessage(t=1))
    assert [type(event) for event in door.events] == [protocol.ErrorEvent, protocol.PongEvent]
    assert door.events[0] == protocol.ErrorEvent(
        code=ErrorCode.RESUME_UNAVAILABLE, message="this connection cannot resume"
    )
    await connection.closed(1000)


async def test_no_configure_in_time_closes_the_socket(
    admitted: Callable[..., Any], settings: Any
) -> None:
    settings.CONFIGURE_TIMEOUT_S = 0.05
    admitted(unsaved_access())
    socket = await opened()
    await until(lambda: socket.closed_with is not None, 2.0)
    assert socket.codes() == ["configure_timeout"]
    assert socket.closed_with == (CloseCode.NO_CONFIGURE, "no configure within 0.05 s")


async def test_a_resume_of_an_unknown_session_leaves_the_socket_open_for_a_while(
    admitted: Callable[..., Any], settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resume, "resume_store", MemoryResumeStore)
    admitted(unsaved_access())
    socket = await opened()
    settings.CONFIGURE_TIMEOUT_S = 0.1  # the re-armed deadline
    await socket.send(
        {"type": "resume", "sessionId": "nobody", "resumeToken": "x" * 20, "lastSeq": 0}
    )
    assert socket.codes() == ["resume_unavailable"]
    assert socket.closed_with is None
    await until(lambda: socket.closed_with is not None, 2.0)
    assert socket.codes() == ["resume_unavailable", "configure_timeout"]


async def test_a_configure_the_plan_refuses_gives_back_its_places(
    admitted: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.SESSIONS_PER_ADDRESS = 1
    access = unsaved_access(workspace_id=901, limit=1)
    admitted(access)

    async def refuse(**_: Any) -> Refusal:
        return Refusal(None, ErrorCode.INVALID, "instructions: too long")

    monkeypatch.setattr(starting, "plan_build", refuse)
    socket = await opened()
    await socket.send({"type": "configure", "mode": "text", "instructions": "Hi."})
    assert socket.codes() == ["invalid"]
    assert socket.closed_with is None  # a corrected configure may follow
    # Its places are free: another session from the same address gets both.
    assert await Places(uuid.uuid4().hex).acquire(access) is None


async def test_places_refuse_past_the_address_limit_then_the_workspace_limit(
    settings: Any,
) -> None:
    settings.SESSIONS_PER_ADDRESS = 1
    first, second, third = (Places(uuid.uuid4().hex) for _ in range(3))
    access = unsaved_access(workspace_id=902, limit=1, address="198.51.100.7")
    assert await first.acquire(access) is None
    refusal = await second.acquire(access)
    assert refusal is not None and refusal.code == ErrorCode.TOO_MANY_SESSIONS_FROM_ADDRESS
    assert refusal.close_code == CloseCode.TOO_MANY
    elsewhere = unsaved_access(workspace_id=902, limit=1, address="198.51.100.8")
    refusal = await third.acquire(elsewhere)
    assert refusal is not None and refusal.code == ErrorCode.TOO_MANY_SESSIONS
    assert refusal.message == "this workspace already has 1 sessions open"
    await first.release()
    assert await third.acquire(elsewhere) is None  # refused, it held nothing; now it fits
    await third.release()


async def test_places_handed_over_are_no_longer_released_by_the_connection(
    settings: Any,
) -> None:
    settings.SESSIONS_PER_ADDRESS = 5
    access = unsaved_access(workspace_id=903, limit=1)
    places = Places(uuid.uuid4().hex)
    assert await places.acquire(access) is None
    pools = places.hand_over()
    assert len(pools) == 2
    await places.release()  # nothing left to release: the session keeps its place
    refusal = await Places(uuid.uuid4().hex).acquire(access)
    assert refusal is not None and refusal.code == ErrorCode.TOO_MANY_SESSIONS
    for pool in pools:
        await live.release(pool=pool, session_id=places.session_id)


def test_a_workspace_without_its_own_limit_has_the_platform_s(settings: Any) -> None:
    settings.SESSION_LIMIT_PER_WORKSPACE = 12
    assert places_module.workspace_limit(unsaved_access(limit=0)) == 12
    assert places_module.workspace_limit(unsaved_access(limit=3)) == 3


async def test_a_stored_session_is_found_only_by_its_own_workspace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MemoryResumeStore()
    monkeypatch.setattr(resume, "resume_store", lambda: store)
    await store.create("s-1", meta=json.dumps({"workspaceId": 7}), state="{}", grown=None, ttl=60)
    assert await resuming.stored_session("s-1", workspace_id=7) is not None
    assert await resuming.stored_session("s-1", workspace_id=8) is None
    assert await resuming.stored_session("s-2", workspace_id=7) is None


async def test_an_unreachable_store_finds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    class Down(MemoryResumeStore):
        async def load(self, session_id: str) -> Any:
            raise RedisConnectionError("down")

    monkeypatch.setattr(resume, "resume_store", Down)
    assert await resuming.stored_session("s-1", workspace_id=7) is None


def test_a_client_ahead_of_the_session_cannot_attach() -> None:
    class Host:
        session = type("S", (), {"last_seq": 5})()

    def message(last_seq: int) -> protocol.ResumeMessage:
        return protocol.ResumeMessage(session_id="s", resume_token="t", last_seq=last_seq)

    assert not resuming.client_is_ahead(Host(), message(5))  # type: ignore[arg-type]
    assert resuming.client_is_ahead(Host(), message(6))  # type: ignore[arg-type]
