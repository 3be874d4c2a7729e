"""The load benchmark's browsers: one WebSocket session each, streaming audio in real time.

A session connects with the workspace's ``pk_`` key from ``http://localhost``, sends
``configure`` (voice mode, and one server tool if asked), waits for ``ready``, then sends
a frame of ``frame_ms`` (20 ms: 640 bytes of PCM16 16 kHz; ``client.js`` sends 40 ms) at
every absolute deadline ``start + k * frame_ms`` and, once a second, ``ping {t}``. Every
``turn_every_s`` it speaks: 600 ms of a tone (speech to the fake recogniser), after which
the recogniser's 500 ms of silence ends the turn and the agent answers.

Everything observed lands in ``Observations``: counters (read twice, for a window) and
timestamped samples (filtered by window), all on this process's monotonic clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.typing import Origin

from tests.engine.providers.fake import tone_pcm

SPEECH_MS = 600  # of speech per turn
_TONE = tone_pcm(SPEECH_MS)  # loud enough to be speech to the fake STT
READY_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 10.0
TOOL_HANDLER = "async (args) => ({ ok: true, n: args.n ?? 0 })"


@dataclass
class Counters:
    frames_due: int = 0
    frames_sent: int = 0
    frames_skipped: int = 0  # more than one period late before the send could start
    frames_late: int = 0  # sent, but the send finished more than one period late
    frames_dropped_backpressure: int = 0  # of the two above, with the socket's buffer full
    pings_sent: int = 0
    pongs: int = 0
    turns_spoken: int = 0
    audio_bytes_in: int = 0

    def minus(self, earlier: Counters) -> Counters:
        return Counters(**{k: v - getattr(earlier, k) for k, v in vars(self).items()})


@dataclass
class Observations:
    counters: Counters = field(default_factory=Counters)
    # (when, value) on the monotonic clock, in seconds and milliseconds
    ping_ms: list[tuple[float, float]] = field(default_factory=list)
    # The same round trip split at the pong's server time (its ``ts``, wall clock ms, the
    # machine's one clock): ping send -> the server stamped the pong (the way in and the
    # server's handling), and that stamp -> the pong read here (the way out and this
    # process's read). Keyed by the ping's send time, as ``ping_ms``.
    ping_in_ms: list[tuple[float, float]] = field(default_factory=list)
    ping_out_ms: list[tuple[float, float]] = field(default_factory=list)
    turn_to_first_delta_ms: list[tuple[float, float]] = field(default_factory=list)
    speech_end_to_audio_ms: list[tuple[float, float]] = field(default_factory=list)
    server_metrics: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    setup_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    unexpected_closes: int = 0


@dataclass(frozen=True)
class Plan:
    key: str
    turn_every_s: float  # 0: never speak
    server_tool: bool
    frame_ms: int = 20

    @property
    def frame_s(self) -> float:
        return self.frame_ms / 1000

    @property
    def frame_bytes(self) -> int:
        return self.frame_ms * 32  # PCM16 at 16 kHz

    @property
    def frames_per_ping(self) -> int:
        return max(1, round(1 / self.frame_s))

    def speech(self) -> list[bytes]:
        size = self.frame_bytes
        return [_TONE[i : i + size].ljust(size, b"\0") for i in range(0, len(_TONE), size)]


def configure_message(plan: Plan) -> str:
    message: dict[str, Any] = {
        "type": "configure",
        "mode": "voice",
        "instructions": "You are the load benchmark's agent.",
    }
    if plan.server_tool:
        message["tools"] = [
            {
                "name": "lookup",
                "description": "Look something up.",
                "parameters": {"n": "number?"},
                "handler": TOOL_HANDLER,
            }
        ]
    return json.dumps(message)


class ClientSession:
    def __init__(self, *, index: int, of: int, port: int, plan: Plan, seen: Observations) -> None:
        self.index, self.of, self.port, self.plan, self.seen = index, of, port, plan, seen
        self.ws: ClientConnection | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self._turn_at: float | None = None
        self._speech_end_at: float | None = None
        self._ready = asyncio.Event()
        self._turn_done = asyncio.Event()
        self._ping_wall: dict[float, float] = {}  # ping t -> wall-clock ms at its send

    async def open(self, *, stream: bool = True) -> ClientConnection:
        loop = asyncio.get_running_loop()
        began = loop.time()
        self.ws = ws = await websockets.connect(
            f"ws://127.0.0.1:{self.port}/v1/session?key={self.plan.key}",
            origin=Origin("http://localhost"),  # a key without origins accepts localhost
            ping_interval=None,  # our own pings measure; keepalive pings would only add noise
            close_timeout=CLOSE_TIMEOUT_S,
            open_timeout=READY_TIMEOUT_S,
        )
        self._tasks.append(asyncio.create_task(self._read(ws)))
        await ws.send(configure_message(self.plan))
        await asyncio.wait_for(self._ready.wait(), READY_TIMEOUT_S)
        self.seen.setup_ms.append((loop.time() - began) * 1000)
        if stream:
            self._tasks.append(asyncio.create_task(self._stream(ws)))
        return ws

    async def warm_up(self) -> None:
        """One typed turn through every provider and the tool, so that lazy imports and
        first connections are paid before the web process's idle memory is read."""
        try:
            ws = await self.open(stream=False)
            await ws.send(json.dumps({"type": "text", "text": "warm up"}))
            await asyncio.wait_for(self._turn_done.wait(), READY_TIMEOUT_S)
        finally:
            await self.close()

    async def close(self) -> None:
        self._closing = True
        for task in self._tasks[1:]:
            task.cancel()
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.close()  # 1000: the session ends now, no resume wait
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # ------------------------------------------------------------ out

    async def _stream(self, ws: ClientConnection) -> None:
        loop = asyncio.get_running_loop()
        counters = self.seen.counters
        plan = self.plan
        frame_s, per_ping, speech = plan.frame_s, plan.frames_per_ping, plan.speech()
        silence = bytes(plan.frame_bytes)
        # Spread the sessions' frames over the period, and their turns over turn_every_s.
        start = loop.time() + frame_s * (self.index % 20) / 20
        ping_at = self.index % per_ping
        cycle = round(plan.turn_every_s / frame_s) if plan.turn_every_s else 0
        speak_at = (cycle * self.index // self.of) if cycle else -1
        frame = 0
        while True:
            deadline = start + frame * frame_s
            if (wait := deadline - loop.time()) > 0:
                await asyncio.sleep(wait)
            counters.frames_due += 1
            position = (frame - speak_at) % cycle if cycle and frame >= speak_at else -1
            speaking = 0 <= position < len(speech)
            if loop.time() > deadline + frame_s:
                counters.frames_skipped += 1
                self._note_backpressure(ws)
            else:
                await ws.send(speech[position] if speaking else silence)
                counters.frames_sent += 1
                if loop.time() > deadline + frame_s:
                    counters.frames_late += 1
                    self._note_backpressure(ws)
            if speaking and position == len(speech) - 1:
                counters.turns_spoken += 1
                self.speech_ended()
            if frame % per_ping == ping_at:
                counters.pings_sent += 1
                t = round(loop.time() * 1000, 3)
                self._ping_wall[t] = time.time() * 1000
                await ws.send(json.dumps({"type": "ping", "t": t}))
            frame += 1

    def speech_ended(self) -> None:
        """The user's last word left now: the next audio frame back closes voice to voice."""
        self._speech_end_at = asyncio.get_running_loop().time()

    def _note_backpressure(self, ws: ClientConnection) -> None:
        if ws.transport.get_write_buffer_size() > 0:
            self.seen.counters.frames_dropped_backpressure += 1

    # ------------------------------------------------------------ in

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for message in ws:
                if isinstance(message, bytes):
                    self._on_audio(len(message))
                else:
                    self._on_event(json.loads(message))
        except websockets.ConnectionClosed:
            pass
        finally:
            if not self._closing:
                self.seen.unexpected_closes += 1

    def _on_audio(self, size: int) -> None:
        self.seen.counters.audio_bytes_in += size
        if self._speech_end_at is not None:
            now = asyncio.get_running_loop().time()
            self.seen.speech_end_to_audio_ms.append((now, (now - self._speech_end_at) * 1000))
            self._speech_end_at = None

    def _on_event(self, event: dict[str, Any]) -> None:
        now = asyncio.get_running_loop().time()
        kind = event.get("type")
        if kind == "pong" and isinstance(event.get("t"), int | float):
            self.seen.counters.pongs += 1
            self.seen.ping_ms.append((event["t"] / 1000, now * 1000 - event["t"]))
            sent_wall = self._ping_wall.pop(event["t"], None)
            if sent_wall is not None and isinstance(event.get("ts"), int):
                at = event["t"] / 1000
                self.seen.ping_in_ms.append((at, event["ts"] - sent_wall))
                self.seen.ping_out_ms.append((at, time.time() * 1000 - event["ts"]))
        elif kind == "turn":
            self._turn_at = now
        elif kind == "chat_delta" and self._turn_at is not None:
            self.seen.turn_to_first_delta_ms.append((now, (now - self._turn_at) * 1000))
            self._turn_at = None
        elif kind == "metrics":
            self.seen.server_metrics.append((now, event))
            self._turn_done.set()
        elif kind == "ready":
            self._ready.set()
        elif kind == "error":
            self.seen.errors[str(event.get("code"))] += 1


class LoopLag:
    """How late this process's event loop wakes a 10 ms timer: the load generator's own lag,
    which every client-side figure includes."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + 0.010
            await asyncio.sleep(0.010)
            now = loop.time()
            self.samples.append((now, (now - due) * 1000))
