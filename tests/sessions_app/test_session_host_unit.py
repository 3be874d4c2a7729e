"""SessionHost on its own: a real VoiceSession on the scripted fakes, a memory resume
store, and sockets that are lists. No consumer, no channel layer, no database."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from engine import protocol
from engine.protocol import CloseCode, ErrorCode
from engine.resume.store import MemoryResumeStore
from engine.session import SessionConfig, VoiceSession
from realtime import resume
from realtime.records import SessionRecorder
from tests.engine.providers.fake import FakeLLM, FakeToolRunner
from tests.sessions_app.harness import until


class ListSink:
    """A socket: what it was sent, and how it was closed."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.audio: list[bytes] = []
        self.displaced = False
        self.closed_with: int | None = None

    async def send_event(self, event: protocol.Stamped) -> None:
        self.events.append(event.to_wire())

    async def send_audio(self, pcm: bytes) -> None:
        self.audio.append(pcm)

    async def displace(self) -> None:
        self.displaced = True

    async def terminate(self, close_code: int, reason: str) -> None:
        self.closed_with = close_code

    def types(self) -> list[str]:
        return [event["type"] for event in self.events if event["type"] != "metrics"]

    def seqs(self) -> list[int]:
        return [event["seq"] for event in self.events]


Made = tuple[resume.SessionHost, VoiceSession, MemoryResumeStore]


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., Any]]:
    hosts: list[resume.SessionHost] = []

    async def factory(store: MemoryResumeStore | None = None, **config: Any) -> Made:
        store = store or MemoryResumeStore()
        host = resume.SessionHost(
            session_id=f"unit-{len(hosts)}",
            workspace_id=7,
            channel="",
            recorder=SessionRecorder(),
            store=store,
        )
        session = VoiceSession(
            config=SessionConfig(
                session_id=host.session_id,
                resume_token="secret-token",
                workspace_id=7,
                llm_name="fake",
                **{"mode": "text", **config},
            ),
            llm=FakeLLM(script=[["Hello ", "there."], ["Again."], ["Third."]]),
            tool_runner=FakeToolRunner(),
            emit=host.emit,
            send_audio=host.send_audio,
        )
        await host.begin(session, tool_runner=None, meta={"workspaceId": 7})
        hosts.append(host)
        return host, session, store

    yield factory
    for host in hosts:
        await host.end(None)


async def say(host: resume.SessionHost, sink: ListSink, text: str, chats: int) -> None:
    await host.handle(protocol.TextMessage(text=text))
    await until(lambda: sink.types().count("chat") >= chats, 3.0)


async def test_live_events_reach_the_attached_sink_in_order(make: Callable[..., Any]) -> None:
    host, session, _ = await make()
    sink = ListSink()
    assert await host.attach(sink, last_seq=0, resume_token="secret-token")
    await session.start()
    await say(host, sink, "hi", 1)
    assert sink.types() == ["ready", "turn", "thinking", "chat_delta", "chat_delta", "chat"]
    assert sink.seqs() == list(range(1, len(sink.events) + 1))


async def test_a_detached_session_is_replayed_from_the_seq_the_client_had(
    make: Callable[..., Any], settings: Any
) -> None:
    settings.SESSION_RESUME_TTL = 30
    host, session, _ = await make()
    first = ListSink()
    await host.attach(first, last_seq=0, resume_token="secret-token")
    await session.start()
    await say(host, first, "hi", 1)
    heard = first.events[-1]["seq"]
    await host.disconnected(first, 4000, clean=False)
    assert resume.local_host(host.session_id) is host  # waits for a resume
    await host.handle(protocol.TextMessage(text="while away"))
    await until(lambda: session.last_seq > heard + 3, 3.0)
    await asyncio.sleep(0.05)
    again = ListSink()
    assert await host.attach(again, last_seq=heard, resume_token="secret-token")
    assert again.seqs()[0] == heard + 1
    assert again.seqs() == list(range(heard + 1, session.last_seq + 1))
    assert "turn" in again.types() and "chat" in again.types()
    assert first.events[-1]["seq"] == heard  # the old socket heard nothing more


async def test_a_replayed_ready_carries_the_token_the_store_never_holds(
    make: Callable[..., Any],
) -> None:
    host, session, store = await make()
    await session.start()  # nobody attached yet: logged only
    await host.flush()
    stored = await store.events_after(host.session_id, 0)
    assert stored[0]["type"] == "ready" and "resumeToken" not in stored[0]
    assert "secret-token" not in json.dumps(stored)
    sink = ListSink()
    await host.attach(sink, last_seq=0, resume_token="the-client's-token")
    assert sink.events[0]["type"] == "ready"
    assert sink.events[0]["resumeToken"] == "the-client's-token"


async def test_the_events_kept_for_a_resume_cost_the_collector_nothing(
    make: Callable[..., Any],
) -> None:
    """The kept events are text: a full collection, which stops the event loop, walks
    none of them (issue 28: they were most of the objects it walked)."""
    host, session, _ = await make()
    sink = ListSink()
    await host.attach(sink, last_seq=0, resume_token="secret-token")
    await session.start()
    await say(host, sink, "hi", 1)
    for _ in range(20):
        await host.handle(protocol.PingMessage(t=1.5))
    gc.collect()
    kept = list(host._log)
    assert len(kept) == len(sink.events) and len(kept) > 20
    assert not any(gc.is_tracked(entry) for entry in kept)
    again = ListSink()
    assert await host.attach(again, last_seq=0, resume_token="secret-token")
    assert again.events == [{**e, "resumeToken": "secret-token"} if e["type"] == "ready" else e
                            for e in sink.events]  # fmt: skip


async def test_the_store_gets_the_events_and_the_state(make: Callable[..., Any]) -> None:
    host, session, store = await make()
    sink = ListSink()
    await host.attach(sink, last_seq=0, resume_token="secret-token")
    await session.start()
    await say(host, sink, "hi", 1)
    await asyncio.sleep(0.05)
    await host.flush()
    stored = await store.load(host.session_id)
    assert stored is not None
    assert stored.meta == {"workspaceId": 7}
    assert [m["content"] for m in stored.state["history"]] == ["hi", "Hello there."]
    kept = await store.events_after(host.session_id, 0)
    assert [e["seq"] for e in kept] == sink.seqs()


async def test_a_second_sink_displaces_the_first(make: Callable[..., Any]) -> None:
    host, session, _ = await make()
    first, second = ListSink(), ListSink()
    await host.attach(first, last_seq=0, resume_token="secret-token")
    await session.start()
    assert await host.attach(second, last_seq=0, resume_token="secret-token")
    assert first.displaced and host.sink is second
    assert second.types() == ["ready"]
    await host.disconnected(first, 1000, clean=True)  # the displaced socket's close
    assert resume.local_host(host.session_id) is host  # ends nothing


async def test_a_clean_close_ends_the_session_and_its_state(make: Callable[..., Any]) -> None:
    host, session, store = await make()
    sink = ListSink()
    await host.attach(sink, last_seq=0, resume_token="secret-token")
    await session.start()
    await host.disconnected(sink, 1000, clean=True)
    assert resume.local_host(host.session_id) is None
    assert await store.load(host.session_id) is None
    assert not await host.attach(ListSink(), last_seq=0, resume_token="secret-token")


class SlowStore(MemoryResumeStore):
    """A store whose writes wait for ``gate`` and, like the Redis client, go on to land
    when the writer is cancelled meanwhile; it notes a write that lands after the delete
    (on Redis, it would make the session's keys again)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate, self.writing = asyncio.Event(), asyncio.Event()
        self.deleted = self.landed_after_delete = False

    async def write(self, *args: Any, **kwargs: Any) -> None:
        async def landing() -> None:
            self.writing.set()
            await self.gate.wait()
            self.landed_after_delete |= self.deleted
            await MemoryResumeStore.write(self, *args, **kwargs)

        await asyncio.shield(asyncio.ensure_future(landing()))

    async def delete(self, session_id: str) -> None:
        self.deleted = True
        await super().delete(session_id)


async def test_a_write_under_way_when_the_session_ends_does_not_bring_its_state_back(
    make: Callable[..., Any],
) -> None:
    store = SlowStore()
    host, session, _ = await make(store=store)
    sink = ListSink()
    await host.attach(sink, last_seq=0, resume_token="secret-token")
    await session.start()  # its ready is written: the write waits at the gate
    await asyncio.wait_for(store.writing.wait(), 3)
    ending = asyncio.create_task(host.disconnected(sink, 1000, clean=True))
    await asyncio.sleep(0.05)
    store.gate.set()
    await asyncio.wait_for(ending, 3)
    await asyncio.sleep(0.05)  # anything still landing has landed
    assert store.deleted and not store.landed_after_delete


async def test_without_a_resume_ttl_an_unclean_close_ends_it(
    make: Callable[..., Any], settings: Any
) -> None:
    settings.SESSION_RESUME_TTL = 0
    host, _, _ = await make()
    sink = ListSink()
    await host.attach(sink, last_seq=0, resume_token="secret-token")
    await host.disconnected(sink, 4000, clean=False)
    assert resume.local_host(host.session_id) is None


async def test_a_detached_session_ends_when_its_ttl_passes(
    make: Callable[..., Any], settings: Any
) -> None:
    settings.SESSION_RESUME_TTL = 0.1
    host, _, store = await make()
    sink = ListSink()
    await host.attach(sink, last_seq=0, resume_token="secret-token")
    await host.disconnected(sink, 4000, clean=False)
    assert resume.local_host(host.session_id) is host
    await until(lambda: resume.local_host(host.session_id) is None, 3.0)
    assert await store.load(host.session_id) is None


async def test_terminate_says_why_then_closes_with_the_code(make: Callable[..., Any]) -> None:
    host, session, _ = await make()
    sink = ListSink()
    await host.attach(sink, last_seq=0, resume_token="secret-token")
    await session.start()
    await host.terminate(
        ErrorCode.SESSION_ENDED, "the workspace ended this session", CloseCode.ENDED
    )
    error = sink.events[-1]
    assert (error["type"], error["code"]) == ("error", "session_ended")
    assert sink.closed_with == CloseCode.ENDED
    assert resume.local_host(host.session_id) is None


async def test_an_idle_session_is_ended_by_the_watch(
    make: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("realtime.resume.host.WATCH_EVERY_S", 0.02)
    host, _, _ = await make(idle_timeout_s=0.05)
    sink = ListSink()
    await host.attach(sink, last_seq=0, resume_token="secret-token")
    await until(lambda: sink.closed_with is not None, 3.0)
    assert sink.closed_with == CloseCode.IDLE
    assert sink.events[-1]["code"] == "session_idle"


async def test_audio_goes_only_to_an_attached_sink(make: Callable[..., Any]) -> None:
    host, _, _ = await make()
    await host.send_audio(b"\0\0")  # detached: dropped, never logged
    sink = ListSink()
    await host.attach(sink, last_seq=0, resume_token="secret-token")
    await host.send_audio(b"\1\1")
    assert sink.audio == [b"\1\1"] and sink.events == []


def test_handover_waits_for_the_slowest_server_tool() -> None:
    from engine.session import SERVER_TOOL_GRACE_S, ToolDefinition

    slow = ToolDefinition(name="slow", handler="async () => 1", timeout_s=40)
    client = ToolDefinition(name="open", client=True, timeout_s=400)
    config = SessionConfig(
        session_id="s", resume_token="r", workspace_id=1, llm_name="x", tools=[slow, client]
    )
    assert resume.handover_wait_s(config) == 40 + SERVER_TOOL_GRACE_S
    bare = SessionConfig(session_id="s", resume_token="r", workspace_id=1, llm_name="x")
    assert resume.handover_wait_s(bare) == resume.host.TURN_SETTLE_S


async def test_a_drain_moves_browsers_and_lets_a_phone_call_finish_within_the_grace(
    make: Callable[..., Any],
) -> None:
    """SIGTERM's drain: a browser's socket gets ``reconnect``; a phone call's stream cannot
    reconnect and hears nothing. At the grace period's end the browser session still there
    is saved for a resume (its state kept, not ended); the phone call ends, closed with
    1012 (its record: ended by a platform restart)."""
    from realtime import drain

    browser_host, browser_session, browser_store = await make()
    phone_host, phone_session, phone_store = await make()
    browser, phone = ListSink(), ListSink()
    browser.movable, phone.movable = True, False  # type: ignore[attr-defined]
    await browser_host.attach(browser, last_seq=0, resume_token="secret-token")
    await phone_host.attach(phone, last_seq=0, resume_token="secret-token")
    await browser_session.start()
    await phone_session.start()
    try:
        started = asyncio.get_running_loop().time()
        await drain.drain(grace_s=0.5)
        assert asyncio.get_running_loop().time() - started >= 0.5  # both stayed
        assert drain.draining()
    finally:
        drain.reset()
    assert browser.types()[-1] == "reconnect"
    assert browser.events[-1]["seq"] == browser_session.last_seq  # in the sequence
    assert "reconnect" not in phone.types()
    assert resume.hosts_live() == []
    assert browser.displaced  # its old socket closes; the client resumes elsewhere
    assert await browser_store.load(browser_host.session_id) is not None  # saved, not ended
    assert phone.closed_with == CloseCode.RESTART
    assert await phone_store.load(phone_host.session_id) is None  # ended
