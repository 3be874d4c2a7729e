"""A socket flooding a real daphne with large frames is closed (4029) before the process
grows: its bytes are counted as daphne hands them over, not when the session gets to them.
Another session on the same process goes on undisturbed."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
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
from tests.faults.processes import LOCAL_ORIGIN, Daphne, Platform, prepare_platform

pytestmark = pytest.mark.slow

ORIGIN = Origin(LOCAL_ORIGIN)
FRAMES, FRAME_BYTES = 1500, 200 * 1024  # 300 MB: what grew daphne by 140 MB before
MAX_GROWTH = 40 * 1024 * 1024


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAIServer]:
    server = FakeOpenAIServer()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
def web(tmp_path: Path, llm: FakeOpenAIServer) -> Iterator[tuple[Daphne, Platform]]:
    var = tmp_path / "var"
    var.mkdir()
    platform = prepare_platform(var, redis_url="", llm_base_url=llm.base_url)  # embedded
    daphne = Daphne(platform)
    yield daphne, platform
    daphne.stop()


def _resident(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def _ready(ws: ClientConnection) -> None:
    await ws.send(json.dumps({"type": "configure", "mode": "text", "instructions": "Brief."}))
    while json.loads(await ws.recv())["type"] != "ready":
        pass


async def _flood(ws: ClientConnection) -> tuple[int, int | None]:
    """Frames sent before the close, and the close code."""
    frame = json.dumps({"type": "context", "text": "x" * FRAME_BYTES})
    sent = 0
    with pytest.raises(ConnectionClosed):
        for _ in range(FRAMES):
            await ws.send(frame)
            sent += 1
        while True:
            await ws.recv()
    return sent, ws.close_code


async def _pings(ws: ClientConnection, until: asyncio.Event) -> list[float]:
    """Round trips of the other session's pings while the flood goes on."""
    trips = []
    while not until.is_set():
        started = time.monotonic()
        await ws.send(json.dumps({"type": "ping", "t": 1}))
        while json.loads(await ws.recv())["type"] != "pong":
            pass
        trips.append(time.monotonic() - started)
        await asyncio.sleep(0.05)
    return trips


async def test_a_flood_of_large_frames_is_closed_before_daphne_grows(
    web: tuple[Daphne, Platform], llm: FakeOpenAIServer
) -> None:
    daphne, platform = web
    url = daphne.session_url(platform.publishable_key)
    # The flooding socket is in a turn (the model answers slowly) while it floods.
    llm.script(Text("Let me "), Delay(3.0), Text("see."), Finish(), Done())
    llm.script(text_reply("Hello from the other session."))
    async with (
        connect(url, origin=ORIGIN, max_size=None) as flooder,
        connect(daphne.session_url(platform.outsider_key), origin=ORIGIN) as other,
    ):
        await _ready(flooder)
        await _ready(other)
        before = _resident(daphne.pid)
        await flooder.send(json.dumps({"type": "text", "text": "look it up"}))
        done = asyncio.Event()
        pings = asyncio.create_task(_pings(other, done))
        sent, code = await _flood(flooder)
        grown = _resident(daphne.pid) - before
        done.set()
        trips = await pings

        assert code == 4029
        assert sent < FRAMES  # refused long before the flood's end
        assert grown < MAX_GROWTH, f"daphne grew {grown // 2**20} MB"
        assert trips, "the other session answered no ping during the flood"

        # The other session is undisturbed: a turn works as before.
        await other.send(json.dumps({"type": "text", "text": "hi"}))
        while (event := json.loads(await other.recv()))["type"] != "chat":
            pass
        assert event["text"] == "Hello from the other session."
    assert daphne.alive()
