"""Two real daphne processes behind one Redis: a session survives the loss of its process.

A browser's connection drops and comes back on the other process (as a load balancer
would send it): when the first process is killed outright, the session is rebuilt from
what it kept in Redis; when the first process is alive (only the network dropped), it
finishes the running turn and hands the session over. Either way the client, after
de-duplicating by seq, has every event once and the conversation goes on.

Each test gets a fresh database both processes share: on PostgreSQL when the test run's
``DATABASE_URL`` is PostgreSQL (created for the test, dropped after it), else one SQLite
file. The processes talk to a fake LLM server on the test's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

import httpx
import pytest
import redis.asyncio as aioredis
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from tests.engine.providers.llm.openai.fake_server import (
    Delay,
    Done,
    FakeOpenAIServer,
    Finish,
    Text,
    text_reply,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

ORIGIN = Origin("http://localhost:3000")


# ---------------------------------------------------------------- the platforms

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _with_database(url: str, name: str) -> str:
    return urlunparse(urlparse(url)._replace(path=f"/{name}"))


@contextlib.contextmanager
def _fresh_postgres(admin_url: str) -> Iterator[str]:
    import psycopg

    name = f"faults_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(admin_url, name)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class Stack:
    """What the platforms share: environment, keys, and the processes started so far."""

    env: dict[str, str]
    var: Path
    publishable_key: str = ""
    secret_key: str = ""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout

    def daphne(self, name: str) -> Daphne:
        """Start a daphne (``await ready()`` before using it)."""
        port = free_port()
        log = self.var / f"daphne-{name}.log"
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
             "platform_site.asgi:application"],
            cwd=ROOT, env=self.env, stdout=log.open("w"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.processes.append(process)
        return Daphne(name, process, port, log)

    def api(self, base: str, path: str) -> Any:
        response = httpx.get(
            f"{base}/api/v1/{path}",
            headers={"Authorization": f"Bearer {self.secret_key}"},
            timeout=10,
        )
        assert response.status_code == 200, response.text
        return response.json()


@dataclass
class Daphne:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ws(self, key: str) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/session?key={key}"

    async def ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        async with httpx.AsyncClient() as client:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{self.http}/healthz", timeout=2)).status_code == 200:
                        return
                assert self.process.poll() is None, self.log.read_text()[-3000:]
                assert loop.time() < deadline, f"daphne {self.name} did not start"
                await asyncio.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL: no goodbye, no final write, no close frames."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


@pytest.fixture
def stack(tmp_path: Path, llm: FakeOpenAIServer) -> Iterator[Stack]:
    test_database = os.environ.get("DATABASE_URL", "")
    var = tmp_path / "var"
    var.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CI"}}
    env.update(
        REDIS_URL=os.environ["REDIS_URL"],
        VAR_DIR=str(var),  # without PostgreSQL: one SQLite file for both processes
        DEBUG="true",
        ALLOW_FAKE_PROVIDERS="true",  # the scripted speech below
        STT_PROVIDER="fake",
        TTS_PROVIDER="fake",
        LLM_BASE_URL=llm.base_url,
        LLM_API_KEY="faults-llm-key",
    )
    with contextlib.ExitStack() as cleanup:
        if test_database.startswith("postgres"):
            env["DATABASE_URL"] = cleanup.enter_context(_fresh_postgres(test_database))
        platform = Stack(env=env, var=var)
        platform.manage("migrate", "--noinput", "-v", "0")
        keys = json.loads(
            platform.manage(
                "create_workspace",
                "Faults",
                "--owner",
                "f@example.com",
                "--json",
                "--inline-config",
                "--inline-tool-code",
            )
        )
        platform.publishable_key, platform.secret_key = keys["publishable_key"], keys["secret_key"]
        try:
            yield platform
        finally:
            for process in platform.processes:
                if process.poll() is None:
                    process.terminate()
                    try:
                        process.wait(15)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait(5)


# ---------------------------------------------------------------- the client


class Browser:
    """What the browser library does with events: keep them, drop a seq seen before."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []  # every JSON event, as it came
        self.kept: dict[int, dict[str, Any]] = {}

    @property
    def last_seq(self) -> int:
        return max(self.kept, default=0)

    async def until(self, ws: ClientConnection, event_type: str, timeout: float = 15) -> dict:
        while True:
            frame = await asyncio.wait_for(ws.recv(), timeout)
            if isinstance(frame, bytes):
                continue  # audio is never replayed: not counted
            event = json.loads(frame)
            self.received.append(event)
            self.kept.setdefault(event["seq"], event)
            if event["type"] == event_type:
                return event

    async def resume(self, ws: ClientConnection, ready: dict[str, Any]) -> None:
        await ws.send(json.dumps({"type": "resume", "sessionId": ready["sessionId"],
                                  "resumeToken": ready["resumeToken"],
                                  "lastSeq": self.last_seq}))  # fmt: skip
        await ws.send(json.dumps({"type": "ping", "t": 1}))

    def assert_complete(self) -> None:
        """Every seq from 1 on, once: none lost, and none sent twice either."""
        seqs = [event["seq"] for event in self.received]
        assert sorted(self.kept) == list(range(1, len(self.kept) + 1))
        assert len(seqs) == len(set(seqs)), seqs


async def _send(ws: ClientConnection, message: dict[str, Any]) -> None:
    await ws.send(json.dumps(message))


def _conversation(llm: FakeOpenAIServer, request: int) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in llm.requests[request].json["messages"]]


async def test_killed_process_session_resumes_on_the_other(stack: Stack, llm: FakeOpenAIServer):
    first, second = await _two_daphnes(stack)
    llm.script(text_reply("Nice to meet you, ", "Ann."))
    llm.script(text_reply("You are Ann."))
    browser = Browser()
    async with connect(first.ws(stack.publishable_key), origin=ORIGIN) as ws:
        await _send(ws, {"type": "configure", "mode": "text", "instructions": "Be brief."})
        ready = await browser.until(ws, "ready")
        await _send(ws, {"type": "text", "text": "My name is Ann."})
        await browser.until(ws, "metrics")
        await asyncio.sleep(0.3)  # the kill comes a moment after the turn, not during it
        first.kill()
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 5)

    outsider = json.loads(stack.manage("create_workspace", "Other", "--owner", "o@example.com",
                                       "--json"))  # fmt: skip
    async with connect(second.ws(outsider["publishable_key"]), origin=ORIGIN) as ws:
        stranger = Browser()
        await stranger.resume(ws, ready)  # another workspace, even with the token
        assert (await stranger.until(ws, "error"))["code"] == "resume_unavailable"

    async with connect(second.ws(stack.publishable_key), origin=ORIGIN) as ws:
        seen = browser.last_seq
        await browser.resume(ws, ready)
        pong = await browser.until(ws, "pong")
        assert pong["seq"] == seen + 1  # nothing was missed; the sequence goes on
        await _send(ws, {"type": "text", "text": "What is my name?"})
        assert (await browser.until(ws, "chat"))["text"] == "You are Ann."
        await ws.close()  # code 1000: the session ends

    assert _conversation(llm, 1)[1:] == [
        ("user", "My name is Ann."),
        ("assistant", "Nice to meet you, Ann."),
        ("user", "What is my name?"),
    ]
    browser.assert_complete()
    record = await _ended_record(stack, second.http, ready["sessionId"])
    assert record["turn_count"] == 2
    redis = aioredis.Redis.from_url(stack.env["REDIS_URL"])
    assert not await redis.exists(f"voice:resume:{{{ready['sessionId']}}}")  # nothing to resume
    await redis.aclose()
    assert [e["text"] for e in record["transcript"]] == [
        "My name is Ann.", "Nice to meet you, Ann.", "What is my name?", "You are Ann."
    ]  # fmt: skip


async def test_dropped_connection_is_handed_over_with_the_running_turn(
    stack: Stack, llm: FakeOpenAIServer
):
    first, second = await _two_daphnes(stack)
    llm.script(Text("Part one. "), Delay(1.5), Text("Part two."), Finish("stop"), Done())
    llm.script(text_reply("Both parts, yes."))
    browser = Browser()
    ws = await connect(first.ws(stack.publishable_key), origin=ORIGIN)
    await _send(ws, {"type": "configure", "mode": "text"})
    ready = await browser.until(ws, "ready")
    await _send(ws, {"type": "text", "text": "Tell me two parts."})
    await browser.until(ws, "chat_delta")
    ws.transport.abort()  # the network drops: no close frame, the server sees 1006

    async with connect(second.ws(stack.publishable_key), origin=ORIGIN) as ws:
        seen = browser.last_seq
        await browser.resume(ws, ready)
        await browser.until(ws, "pong")
        missed = [e for e in browser.received if e["seq"] > seen]
        assert [e["type"] for e in missed] == ["chat_delta", "chat", "metrics", "pong"]
        assert missed[1]["text"] == "Part one. Part two."
        await _send(ws, {"type": "text", "text": "Did you say both?"})
        assert (await browser.until(ws, "chat"))["text"] == "Both parts, yes."
        await ws.close()

    assert first.process.poll() is None  # it handed over; nobody killed it
    assert _conversation(llm, 1)[-2:] == [
        ("assistant", "Part one. Part two."),
        ("user", "Did you say both?"),
    ]
    browser.assert_complete()
    record = await _ended_record(stack, first.http, ready["sessionId"])
    assert (record["turn_count"], record["close_code"]) == (2, 1000)


@pytest.mark.parametrize("where", ["same process", "other process"])
async def test_a_session_resumed_elsewhere_closes_the_old_socket_as_displaced(
    stack: Stack, llm: FakeOpenAIServer, where: str
):
    """A second tab resumes the session while the first is still open: the first socket is
    closed at once with 4012 (a refusal: the old tab must not resume it back), the new one
    carries the conversation."""
    first, second = await _two_daphnes(stack)
    llm.script(text_reply("Still here."))
    browser = Browser()
    async with connect(first.ws(stack.publishable_key), origin=ORIGIN) as old:
        await _send(old, {"type": "configure", "mode": "text"})
        ready = await browser.until(old, "ready")
        target = first if where == "same process" else second
        async with connect(target.ws(stack.publishable_key), origin=ORIGIN) as new:
            await browser.resume(new, ready)
            await browser.until(new, "pong")
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(old.recv(), 5)
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == 4012
            await _send(new, {"type": "text", "text": "Are you there?"})
            assert (await browser.until(new, "chat"))["text"] == "Still here."
            await new.close()
    browser.assert_complete()


async def _two_daphnes(stack: Stack) -> tuple[Daphne, Daphne]:
    first, second = stack.daphne("a"), stack.daphne("b")
    await first.ready()
    await second.ready()
    return first, second


async def _ended_record(stack: Stack, base: str, session_id: str) -> dict[str, Any]:
    """The session's one record (same id throughout), once its end is written."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while True:
        record = await asyncio.to_thread(stack.api, base, f"sessions/{uuid.UUID(hex=session_id)}")
        if record["ended_at"] is not None or loop.time() > deadline:
            return record  # type: ignore[no-any-return]
        await asyncio.sleep(0.2)
