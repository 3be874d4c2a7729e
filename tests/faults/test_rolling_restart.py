"""A deploy drops no session: two daphne processes are restarted one after the other
(SIGTERM, as an orchestrator's rolling update sends it) under live sessions.

Each session talks all along (a typed turn, its reply, the next). On SIGTERM a process
says ``draining`` on /healthz, tells its clients to ``reconnect``, and each client (as the
browser library does) opens a new socket to a process the "balancer" picks (one that is not
draining) and resumes from the last event it saw; the draining process hands the session
over and exits once it has none left, well within its grace period. Every session survives
both restarts with every event once and in order, and every turn answered once.

``ROLLING_SESSIONS`` sets how many sessions (12 by default, for CI time; the issue's 50 was
run by hand, see docs/scaling.md, "Deploys").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.engine.providers.llm.openai.fake_server import DEFAULT_SCRIPT, FakeOpenAIServer
from tests.faults.processes import (
    INLINE,
    LOCAL_ORIGIN,
    Daphne,
    Platform,
    RedisServer,
    _manage,
    free_port,
    prepare_platform,
)
from tests.faults.test_two_daphnes import _fresh_postgres as fresh_postgres

SESSIONS = int(os.environ.get("ROLLING_SESSIONS", "12"))
# Four daphne starts and two drains on a shared machine, plus the sessions' turns.
pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.timeout(240 + 5 * SESSIONS)]
# Long enough for every session to move on a loaded shared machine (they usually move in a
# few seconds; the process exits as soon as they have).
GRACE_S = max(30.0, 1.2 * SESSIONS)
TEXT = {"type": "configure", "mode": "text", "instructions": "Be brief."}


class Balancer:
    """What a load balancer does with /healthz: new connections go to a process that is
    up and not draining (round robin)."""

    def __init__(self) -> None:
        self.daphnes: list[Daphne] = []
        self._next = 0

    def pick(self) -> Daphne:
        live = [daphne for daphne in self.daphnes if daphne.alive() and daphne.healthz() == 200]
        assert live, "no process to send a session to"
        self._next += 1
        return live[self._next % len(live)]


class Stack:
    def __init__(self, var: Any, database_url: str | None) -> None:
        self.redis = RedisServer(var).start()
        self.llm_port = free_port()
        self.platform: Platform = prepare_platform(
            var, redis_url=self.redis.url, llm_base_url=f"http://127.0.0.1:{self.llm_port}/v1"
        )
        if database_url:  # four processes writing records: PostgreSQL, as deployed
            self.platform.env["DATABASE_URL"] = database_url
            _manage(self.platform.env, "migrate", "--noinput", "-v", "0")
            workspace = ("create_workspace", "Rolling", "--owner", "r@example.com", "--json")
            created = _manage(self.platform.env, *workspace, *INLINE)
            self.platform.publishable_key = json.loads(created)["publishable_key"]
        self.platform.env.update(
            DRAIN_GRACE_S=str(GRACE_S),
            SESSION_LIMIT_PER_WORKSPACE=str(SESSIONS * 2),
            SESSIONS_PER_ADDRESS=str(SESSIONS * 2),  # every client comes from 127.0.0.1
            WS_CONNECTIONS_PER_MINUTE=str(SESSIONS * 10),
            LLM_REQUESTS_PER_MINUTE="100000",
            TURNS_PER_MINUTE="1000",  # a turn a second or so, more than a person says
        )
        self.balancer = Balancer()
        self.started: list[Daphne] = []

    def daphne(self, name: str) -> Daphne:
        daphne = Daphne(self.platform, name)
        self.started.append(daphne)
        self.balancer.daphnes.append(daphne)
        return daphne

    def stop(self) -> None:
        for daphne in self.started:
            daphne.stop()
        self.redis.stop()


@pytest.fixture
def stack(tmp_path: Any) -> Iterator[Stack]:
    test_database = os.environ.get("DATABASE_URL", "")
    with contextlib.ExitStack() as cleanup:
        database_url = None
        if test_database.startswith("postgres"):
            database_url = cleanup.enter_context(fresh_postgres(test_database))
        stack = Stack(tmp_path, database_url)
        try:
            yield stack
        finally:
            stack.stop()


@pytest.fixture
async def llm(stack: Stack) -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(port=stack.llm_port, default=DEFAULT_SCRIPT) as server:
        yield server


class MovingSession:
    """One conversation as the browser library runs it: events de-duplicated by seq; on
    ``reconnect`` a new socket at once, resuming from the last event seen, the old
    socket's later frames ignored and the socket closed once the new one has resumed."""

    def __init__(self, name: str, balancer: Balancer, key: str) -> None:
        self.name, self._balancer, self._key = name, balancer, key
        self.kept: dict[int, dict[str, Any]] = {}
        self.current: ClientConnection | None = None  # the socket whose frames count
        self.sending: ClientConnection | None = None  # established (configure or resume sent)
        self.moves = 0
        self.ready: dict[str, Any] = {}
        self._changed = asyncio.Event()
        self._readers: list[asyncio.Task[None]] = []  # and moves
        self._sockets: list[ClientConnection] = []
        self._moved: ClientConnection | None = None

    @property
    def last_seq(self) -> int:
        return max(self.kept, default=0)

    async def _open(self) -> ClientConnection:
        daphne = await asyncio.to_thread(self._balancer.pick)
        ws = await connect(daphne.session_url(self._key), origin=LOCAL_ORIGIN, proxy=None)  # type: ignore[arg-type]
        self._sockets.append(ws)
        self.current, self.sending = ws, None
        self._readers.append(asyncio.create_task(self._read(ws)))
        return ws

    async def start(self) -> None:
        ws = await self._open()
        await ws.send(json.dumps(TEXT))
        self.sending = ws
        await self.wait_for(lambda: any(e["type"] == "ready" for e in self.kept.values()), 20)
        self.ready = next(e for e in self.kept.values() if e["type"] == "ready")

    async def _read(self, ws: ClientConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for frame in ws:
                if ws is not self.current or isinstance(frame, bytes):
                    continue
                event = json.loads(frame)
                if event["seq"] <= self.last_seq:
                    continue
                self.kept[event["seq"]] = event
                self._changed.set()
                if self._moved is not None:  # resumed: the library closes the old socket
                    self._readers.append(asyncio.create_task(self._moved.close()))
                    self._moved = None
                if event["type"] == "reconnect":
                    self._readers.append(asyncio.create_task(self._move()))

    async def _move(self) -> None:
        self._moved = self.current
        self.current = self.sending = None
        self.moves += 1
        ws = await self._open()
        resume = {"type": "resume", "sessionId": self.ready["sessionId"],
                  "resumeToken": self.ready["resumeToken"], "lastSeq": self.last_seq}  # fmt: skip
        await ws.send(json.dumps(resume))
        self.sending = ws

    async def wait_for(self, check: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            left = deadline - time.monotonic()
            errors = [e for e in self.kept.values() if e["type"] == "error"]
            assert left > 0, f"{self.name}: timed out; kept {self.types()}; {errors}"
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 0.5))

    async def say(self, text: str) -> None:
        await self.wait_for(lambda: self.sending is not None, 30)
        assert self.sending is not None
        await self.sending.send(json.dumps({"type": "text", "text": text}))
        await self.wait_for(lambda: any(text in e.get("text", "") for e in self.chats()), 30)

    def chats(self) -> list[dict[str, Any]]:
        return [e for _, e in sorted(self.kept.items()) if e["type"] == "chat"]

    def types(self) -> list[str]:
        return [e["type"] for _, e in sorted(self.kept.items())]

    async def close(self) -> None:
        if self.current is not None:
            await self.current.close()
        for ws in self._sockets:
            with contextlib.suppress(Exception):
                await ws.close()
        for reader in self._readers:
            reader.cancel()


async def _talk(session: MovingSession, said: list[str], stop: asyncio.Event) -> None:
    turn = 0
    while not stop.is_set():
        turn += 1
        text = f"{session.name} turn {turn}"
        await session.say(text)
        said.append(text)
        await asyncio.sleep(0.5)


async def _roll(stack: Stack, old: Daphne, new_name: str) -> tuple[Daphne, float]:
    """SIGTERM ``old`` as a rolling update does; its healthz says draining at once; a new
    process takes its place. Returns the new process and how long ``old`` took to exit."""
    started = time.monotonic()
    os.kill(old.pid, signal.SIGTERM)

    def draining() -> bool:
        try:
            response = httpx.get(f"{old.url}/healthz", timeout=3)
        except httpx.HTTPError:
            return not old.alive()
        return response.status_code == 503 and (
            response.json() == {"draining": True} or not old.alive()
        )

    saw_draining = await asyncio.to_thread(draining)
    exit_code = await asyncio.to_thread(old.popen.wait, GRACE_S + 15)
    took = time.monotonic() - started
    assert saw_draining
    assert exit_code == 0, old.log_text()[-3000:]
    replacement = await asyncio.to_thread(stack.daphne, new_name)
    return replacement, took


async def test_a_rolling_restart_of_two_processes_drops_no_session(
    stack: Stack, llm: FakeOpenAIServer
) -> None:
    first = await asyncio.to_thread(stack.daphne, "daphne-a")
    second = await asyncio.to_thread(stack.daphne, "daphne-b")
    sessions = [
        MovingSession(f"s{n}", stack.balancer, stack.platform.publishable_key)
        for n in range(SESSIONS)
    ]
    for session in sessions:
        await session.start()
    said: dict[str, list[str]] = {session.name: [] for session in sessions}
    stop = asyncio.Event()
    talking = [asyncio.create_task(_talk(s, said[s.name], stop)) for s in sessions]
    await asyncio.sleep(2)

    stack.balancer.daphnes.remove(first)  # the balancer's health check would drop it too
    _, first_took = await _roll(stack, first, "daphne-a2")
    await asyncio.sleep(2)
    stack.balancer.daphnes.remove(second)
    _, second_took = await _roll(stack, second, "daphne-b2")
    await asyncio.sleep(3)
    stop.set()
    await asyncio.wait_for(asyncio.gather(*talking), 60)
    for session in sessions:
        await session.close()

    turns = sum(len(texts) for texts in said.values())
    moves = sum(session.moves for session in sessions)
    print(f"rolling restart: {SESSIONS} sessions, {turns} turns, {moves} moves; the two "
          f"processes exited {first_took:.1f} s and {second_took:.1f} s after SIGTERM")  # fmt: skip
    for session in sessions:
        assert sorted(session.kept) == list(range(1, session.last_seq + 1)), session.name
        assert session.moves >= 1, f"{session.name} never moved"
        errors = [e for e in session.kept.values() if e["type"] == "error"]
        assert not errors, errors
        turns = [e["text"] for _, e in sorted(session.kept.items()) if e["type"] == "turn"]
        assert turns == said[session.name], session.name  # every turn once, in order
        replies = [e["text"] for e in session.chats()]
        assert replies == [f"You said: {text}" for text in said[session.name]], session.name
    for daphne in (first, second):
        log = daphne.log_text()
        assert "ERROR" not in log, log[-3000:]
        assert "drained" in log
    # Each exited once its sessions had moved, not at the end of its grace period.
    assert first_took < GRACE_S and second_took < GRACE_S, (first_took, second_took)
