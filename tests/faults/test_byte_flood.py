"""A socket flooding a real daphne with large frames is closed (4029) before the process
grows: its bytes are counted as daphne hands them over, not when the session gets to them.
Another session on the same process goes on undisturbed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
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
from tests.faults.processes import LOCAL_ORIGIN, Daphne, Platform

pytestmark = pytest.mark.slow

ORIGIN = Origin(LOCAL_ORIGIN)
FRAMES, FRAME_BYTES = 1500, 200 * 1024  # 300 MB: what grew daphne by 140 MB before
MAX_GROWTH = 40 * 1024 * 1024


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


TINY_MESSAGES = 900_000  # 1.8 MB of payload: within the byte budget
TINY_GROWTH = 8 * 1024 * 1024  # they held 30 MB, queued while the session was set up


def _tiny_frames(count: int) -> bytes:
    """``count`` text frames of two bytes (``{}``) each, masked with zeros, ready to write."""
    return b"\x81\x82\x00\x00\x00\x00{}" * count


async def _events_until_closed(ws: ClientConnection) -> list[dict[str, object]]:
    events = []
    with pytest.raises(ConnectionClosed):
        while True:
            frame = await asyncio.wait_for(ws.recv(), 30)
            if isinstance(frame, str):
                events.append(json.loads(frame))
    return events


async def _calm_turns(ws: ClientConnection, turns: int) -> list[str]:
    replies = []
    for n in range(turns):
        await ws.send(json.dumps({"type": "text", "text": f"calm {n}"}))
        while (event := json.loads(await ws.recv()))["type"] != "chat":
            pass
        replies.append(event["text"])
    return replies


async def test_a_flood_of_tiny_messages_is_closed_before_daphne_grows(
    web: tuple[Daphne, Platform], llm: FakeOpenAIServer
) -> None:
    """Tiny messages pass any byte budget: they are counted too (100 a second, 500 at once),
    as they arrive, while a calm session on the same process talks on."""
    daphne, platform = web
    for n in range(3):
        llm.script(text_reply(f"Calm reply {n}."))
    async with (
        connect(daphne.session_url(platform.publishable_key), origin=ORIGIN) as flooder,
        connect(daphne.session_url(platform.outsider_key), origin=ORIGIN) as calm,
    ):
        await _ready(calm)
        before = _resident(daphne.pid)
        frames = _tiny_frames(TINY_MESSAGES)
        turns = asyncio.create_task(_calm_turns(calm, 3))
        # Sent while its session is being set up: the consumer is busy, daphne reads on.
        await flooder.send(json.dumps({"type": "configure", "mode": "text"}))
        for at in range(0, len(frames), 64 * 1024):  # as fast as the socket takes them
            flooder.transport.write(frames[at : at + 64 * 1024])
            await asyncio.sleep(0)
        events = await _events_until_closed(flooder)
        grown = _resident(daphne.pid) - before
        assert await asyncio.wait_for(turns, 60) == [f"Calm reply {n}." for n in range(3)]
    assert flooder.close_code == 4029
    assert "too_many_messages" in [event.get("code") for event in events]
    assert grown < TINY_GROWTH, f"daphne grew {grown // 2**20} MB"
    assert daphne.alive()


async def test_a_session_dropped_for_an_oversized_message_does_not_hold_a_drain(
    web: tuple[Daphne, Platform],
) -> None:
    """A message past 1 MiB drops its socket (autobahn says 1006, as for any dropped
    socket): the session waits for a resume. A SIGTERM drain waited for it until its grace
    period (60 s) ran out; now it is saved for a resume at once, and the process exits once
    the calm session beside it has moved (told ``reconnect``: it leaves, as the browser
    library does to reconnect elsewhere)."""
    daphne, platform = web
    async with (
        connect(
            daphne.session_url(platform.publishable_key), origin=ORIGIN, max_size=None
        ) as oversized,
        connect(daphne.session_url(platform.outsider_key), origin=ORIGIN) as calm,
    ):
        await _ready(oversized)
        await _ready(calm)
        await oversized.send(json.dumps({"type": "context", "text": "x" * (2 * 1024 * 1024)}))
        with pytest.raises(ConnectionClosed):
            while True:
                await asyncio.wait_for(oversized.recv(), 20)
        await asyncio.sleep(1)  # the server has seen the socket go
        signalled = time.monotonic()
        os.kill(daphne.pid, signal.SIGTERM)
        while json.loads(await asyncio.wait_for(calm.recv(), 20))["type"] != "reconnect":
            pass
    await asyncio.to_thread(daphne.popen.wait, 90)
    took = time.monotonic() - signalled
    assert took < 20, f"the drain took {took:.0f} s of its 60"


@pytest.mark.parametrize("opcode", [0x89, 0x8A], ids=["pings", "pongs"])
async def test_a_flood_of_pings_or_pongs_is_closed_like_any_flood(
    web: tuple[Daphne, Platform], llm: FakeOpenAIServer, opcode: int
) -> None:
    """A client's ping and pong frames never reach the session (the server answers a ping
    itself, and logged a warning for each unasked-for pong): they count as its messages,
    so a flood of them is closed (4029, too_many_messages) as any other is, while a calm
    session on the same process talks on. Before, nothing counted them: the flooder kept
    the process answering pongs for as long as it liked."""
    daphne, platform = web
    for n in range(3):
        llm.script(text_reply(f"Calm reply {n}."))
    flood = bytes([opcode, 0x80, 0, 0, 0, 0]) * 200_000  # empty control frames, zero mask
    async with (
        connect(daphne.session_url(platform.publishable_key), origin=ORIGIN) as flooder,
        connect(daphne.session_url(platform.outsider_key), origin=ORIGIN) as calm,
    ):
        await _ready(flooder)
        await _ready(calm)
        turns = asyncio.create_task(_calm_turns(calm, 3))
        for at in range(0, len(flood), 60 * 1024):
            if flooder.transport.is_closing():
                break
            flooder.transport.write(flood[at : at + 60 * 1024])
            await asyncio.sleep(0)
        events = await _events_until_closed(flooder)
        assert await asyncio.wait_for(turns, 60) == [f"Calm reply {n}." for n in range(3)]
    assert flooder.close_code == 4029
    assert "too_many_messages" in [event.get("code") for event in events]
    assert daphne.alive()
