"""The resume snapshot is written as a delta: the small state whole, of the history only
what changed since the last write, so a long session writes about the same per turn."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from engine import protocol
from engine.resume.snapshot import SnapshotWriter
from engine.resume.store import Grown, MemoryResumeStore
from engine.session import SessionConfig, ToolDefinition, VoiceSession
from realtime.resume import SessionHost
from realtime.resume.store import RedisResumeStore
from tests.engine.providers.fake import FakeLLM, FakeToolRunner, tool_call


def _snapshot(history: list[dict[str, Any]], call_ids: list[str] | None = None) -> dict:
    return {"seq": len(history), "history": history, "variables": {}, "turnIds": 1,
            "usedCallIds": call_ids or [], "pendingCalls": []}  # fmt: skip


def test_only_new_or_changed_entries_are_written_again() -> None:
    writer = SnapshotWriter()
    history: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    first = writer.next(_snapshot(history))
    assert first.grown == Grown(history_kept=0, history=[json.dumps(history[0])], call_ids=[])
    assert "history" not in json.loads(first.state)

    placeholder = {"role": "tool", "tool_call_id": "c1", "content": '{"error": "interrupted"}'}
    history += [{"role": "assistant", "content": None, "tool_calls": []}, placeholder]
    grown = writer.next(_snapshot(history, ["c1"])).grown
    assert (grown.history_kept, len(grown.history), grown.call_ids) == (None, 2, ["c1"])

    history.append({"role": "assistant", "content": "Done."})
    placeholder["content"] = '{"ok": true}'  # a tool's result replaces its placeholder
    grown = writer.next(_snapshot(history, ["c1"])).grown
    assert grown.history_kept == 2  # rewritten from the changed entry on
    assert [json.loads(e)["content"] for e in grown.history] == ['{"ok": true}', "Done."]
    assert grown.call_ids == []

    assert writer.next(_snapshot(history, ["c1"])).grown == Grown(None, [], [])
    history.clear()  # reset
    assert writer.next(_snapshot(history, ["c1"])).grown == Grown(0, [], [])

    history.append({"role": "user", "content": "again"})
    writer.forget()  # a write failed: the next one replaces everything
    grown = writer.next(_snapshot(history, ["c1"])).grown
    assert (grown.history_kept, len(grown.history), grown.call_ids) == (0, 1, ["c1"])


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def store(request: pytest.FixtureRequest) -> MemoryResumeStore | RedisResumeStore:
    return MemoryResumeStore() if request.param == "memory" else RedisResumeStore()


async def test_the_store_puts_the_snapshot_back_together(store: Any) -> None:
    sid = "e" * 32
    writer = SnapshotWriter()
    history = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]
    first = writer.next(_snapshot(history, ["a"]))
    await store.create(sid, meta="{}", state=first.state, grown=first.grown, ttl=5)
    history[1]["content"] = "two, cut"
    history.append({"role": "user", "content": "three"})
    latest = writer.next(_snapshot(history, ["a", "b"]))
    await store.write(sid, events=[], state=latest.state, grown=latest.grown, ttl=5)
    loaded = await store.load(sid)
    assert loaded is not None and loaded.state == _snapshot(history, ["a", "b"])

    history.clear()
    emptied = writer.next(_snapshot(history, ["a", "b"]))
    await store.write(sid, events=[], state=emptied.state, grown=emptied.grown, ttl=5)
    loaded = await store.load(sid)
    assert loaded is not None and loaded.state.get("history", []) == []
    assert loaded.state["usedCallIds"] == ["a", "b"]
    await store.delete(sid)


class _NoRecord:
    on_quota_exceeded: Any = None

    def observe(self, event: protocol.ServerEvent) -> None: ...

    async def finish(self, close_code: int | None, usage: Any = None) -> None: ...


class _CountingStore(MemoryResumeStore):
    def __init__(self) -> None:
        super().__init__()
        self.history_bytes = 0

    async def write(self, session_id: str, *, grown: Grown | None = None, **kwargs: Any) -> None:
        self.history_bytes += sum(len(e) for e in grown.history) if grown else 0
        await super().write(session_id, grown=grown, **kwargs)


async def test_a_long_session_writes_each_history_entry_about_once() -> None:
    turns = 30
    rounds: list[Any] = []
    for turn in range(turns):
        rounds += [[tool_call("look", {"n": turn}, id=f"c{turn}")], [f"Answer {turn}. " * 5]]
    store = _CountingStore()
    host = SessionHost(
        session_id="d" * 32,
        workspace_id=1,
        channel="",
        recorder=_NoRecord(),  # type: ignore[arg-type]
        store=store,
    )
    replied = asyncio.Event()

    async def emit(event: protocol.Stamped) -> None:
        await host.emit(event)
        if isinstance(event.event, protocol.ChatEvent):
            replied.set()

    session = VoiceSession(
        config=SessionConfig(session_id="d" * 32, resume_token="-", workspace_id=1,
                             llm_name="fake", mode="text",
                             tools=[ToolDefinition(name="look", handler="() => 1")]),
        llm=FakeLLM(script=rounds), tool_runner=FakeToolRunner(), emit=emit,
        send_audio=host.send_audio,
    )  # fmt: skip
    await host.begin(session, tool_runner=None, meta={})
    await session.start()
    try:
        for turn in range(turns):
            replied.clear()
            await host.handle(protocol.TextMessage(text=f"question {turn}"))
            await replied.wait()
            await session.current_turn_done(5)
            await host.flush()
        loaded = await store.load("d" * 32)
        assert loaded is not None and loaded.state["history"] == session.snapshot()["history"]
        whole = len(json.dumps(session.snapshot()["history"]))
        # Whole snapshots per event would have written about turns / 2 times as much.
        assert store.history_bytes < 1.5 * whole, (store.history_bytes, whole)
    finally:
        await host.end(1000)
