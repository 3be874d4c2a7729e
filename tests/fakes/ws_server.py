"""Shared by the fake text-to-speech servers and their tests: deterministic speech, scripted
faults, a WebSocket server on a real socket that records every connection, and the checks
every adapter's tests make.

Every fake "speaks" ``speech_pcm(text)``: a 24 kHz tone whose length follows the text, cut
into a few frames, so a test knows exactly which bytes must arrive. A fault queued with
``inject`` applies to the next connection (or request) and fires after ``after_frames``
frames of audio::

    async with FakeOrpheusServer() as server:
        server.inject(Hang(after_frames=1))       # one frame, then silence
        server.inject(Cut(code=1011, reason="x")) # the provider closes mid-stream
        server.inject(Cut())                      # the TCP connection drops
        server.inject(OddFrames())                # frames that split samples
        ...
        assert server.connections[0].received[-1] == "__END__"
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from engine.providers.base import TTS, ProviderError
from tests.engine.providers.fake import tone_pcm
from tests.fakes.lifecycle import ServerLifecycle

SAMPLE_RATE = 24_000
# What the tests have spoken: it must never surface in an error message or a log line.
SENTENCE = "Your card ending 4111 is now blocked."
MS_PER_CHARACTER = 5  # short audio keeps the tests fast
FRAMES = 4


def speech_pcm(text: str) -> bytes:
    """What every fake says for ``text``: PCM16 LE mono, 24 kHz, longer for longer text."""
    return tone_pcm(len(text) * MS_PER_CHARACTER, sample_rate=SAMPLE_RATE, hz=440)


def split_frames(pcm: bytes, count: int = FRAMES, *, odd: bool = False) -> list[bytes]:
    """``pcm`` in ``count`` frames; with ``odd``, cut at odd offsets so frames split samples."""
    cuts = {len(pcm) * k // count for k in range(1, count)}
    if odd:
        cuts = {cut | 1 for cut in cuts}
    bounds = [0, *sorted(cut for cut in cuts if 0 < cut < len(pcm)), len(pcm)]
    return [pcm[start:end] for start, end in itertools.pairwise(bounds)]


# ---------------------------------------------------------------- faults


@dataclass(frozen=True)
class Hang:
    """Send nothing more (after ``after_frames`` frames) until the client gives up."""

    after_frames: int = 0


@dataclass(frozen=True)
class Cut:
    """Break off the stream after ``after_frames`` frames: a WebSocket close with ``code``
    and ``reason``, or with ``code=None`` (and always over HTTP) a dropped TCP connection."""

    after_frames: int = 1
    code: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class Garbage:
    """Send something that is not the protocol after ``after_frames`` frames."""

    after_frames: int = 0


@dataclass(frozen=True)
class OddFrames:
    """Deliver the whole audio, cut at odd byte offsets."""

    after_frames: int | None = None  # never fires: it changes the framing instead


Fault = Hang | Cut | Garbage | OddFrames


async def play(
    frames: list[bytes],
    fault: Any,
    send: Callable[[bytes], Awaitable[None]],
    misbehave: Callable[[Any], Awaitable[None]],
) -> bool:
    """Send ``frames``; at the fault's position misbehave instead and return False."""
    position = getattr(fault, "after_frames", None)
    for index in range(len(frames) + 1):
        if index == position:
            await misbehave(fault)
            return False
        if index < len(frames):
            await send(frames[index])
    return True


# ---------------------------------------------------------------- WebSocket servers


@dataclass
class Connection:
    """One client connection as the fake saw it."""

    path: str
    query: dict[str, str]
    headers: dict[str, str]  # names lower-cased
    received: list[str | bytes] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)  # the client is gone


class FakeWebSocketServer(ServerLifecycle):
    """Serves WebSockets on 127.0.0.1 and an ephemeral port; subclasses speak a protocol.

    ``reject`` may refuse a handshake with an HTTP status; ``converse`` plays one
    connection. Protocol mistakes by the client are recorded in ``protocol_errors``.
    """

    garbage: str | bytes = "<html><body>502 Bad Gateway</body></html>"

    def __init__(self, *, frames: int = FRAMES) -> None:
        self.frames = frames
        self.port = 0
        self.connections: list[Connection] = []
        self.protocol_errors: list[str] = []
        self._faults: deque[Any] = deque()
        self._server: Server | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def inject(self, *faults: Any) -> None:
        """Queue one fault per coming connection."""
        self._faults.extend(faults)

    def reject(self, request: Request) -> tuple[int, str] | None:
        return None

    async def converse(self, websocket: ServerConnection, connection: Connection, fault: Any):
        raise NotImplementedError

    async def receive(self, websocket: ServerConnection, connection: Connection) -> str | bytes:
        message = await websocket.recv()
        connection.received.append(message)
        return message

    async def speak(
        self,
        websocket: ServerConnection,
        text: str,
        fault: Any,
        send: Callable[[bytes], Awaitable[None]],
    ) -> bool:
        """Send ``speech_pcm(text)`` in frames through ``send``; False if a fault ended it."""
        frames = split_frames(speech_pcm(text), self.frames, odd=isinstance(fault, OddFrames))
        return await play(frames, fault, send, lambda fault: self.misbehave(websocket, fault))

    async def misbehave(self, websocket: ServerConnection, fault: Any) -> None:
        if isinstance(fault, Cut) and fault.code is None:
            websocket.transport.abort()
            return
        if isinstance(fault, Cut):
            await websocket.close(fault.code, fault.reason)
            return
        if isinstance(fault, Garbage):
            await websocket.send(self.garbage)
        await websocket.wait_closed()  # Hang, or garbage sent: wait for the client to leave

    async def start(self) -> None:
        self._server = await serve(self._serve, "127.0.0.1", 0, process_request=self._handshake)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def _handshake(self, websocket: ServerConnection, request: Request) -> Response | None:
        refusal = self.reject(request)
        return None if refusal is None else websocket.respond(*refusal)

    async def _serve(self, websocket: ServerConnection) -> None:
        request = websocket.request
        assert request is not None
        target = urlsplit(request.path)
        connection = Connection(
            path=target.path,
            query=dict(parse_qsl(target.query)),
            headers={name.lower(): value for name, value in request.headers.raw_items()},
        )
        self.connections.append(connection)
        fault = self._faults.popleft() if self._faults else None
        try:
            with contextlib.suppress(ConnectionClosed):
                await self.converse(websocket, connection, fault)
            await websocket.wait_closed()
        finally:
            connection.closed.set()

    async def refuse(self, websocket: ServerConnection, problem: str, code: int = 1011) -> None:
        """Record a protocol mistake by the client and end the connection over it."""
        self.protocol_errors.append(problem)
        await websocket.close(code, problem)


# ---------------------------------------------------------------- checks for the tests


async def spoken(tts: TTS, text: str = SENTENCE, voice: str | None = None) -> list[bytes]:
    return [chunk async for chunk in tts.synthesize(text, voice=voice)]


def assert_whole_samples(chunks: list[bytes], text: str = SENTENCE) -> None:
    """Several chunks, each of whole samples, adding up to exactly what the fake said."""
    assert len(chunks) > 1
    assert all(len(chunk) % 2 == 0 for chunk in chunks)
    assert b"".join(chunks) == speech_pcm(text)


async def failure(
    tts: TTS,
    caplog: pytest.LogCaptureFixture,
    *,
    secrets: Iterable[str],
    voice: str | None = None,
) -> ProviderError:
    """The ``ProviderError`` speaking ``SENTENCE`` raises, checked to quote no secret."""
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ProviderError) as caught:
        await spoken(tts, voice=voice)
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("sessions_app"))
    for secret in (*secrets, "4111"):
        assert secret not in str(caught.value)
        assert secret not in ours
    assert caught.value.code == "tts_failed"
    return caught.value


async def silence_failure(
    tts: TTS, caplog: pytest.LogCaptureFixture, *, secrets: Iterable[str], timeout_s: float
) -> ProviderError:
    started = time.monotonic()
    error = await failure(tts, caplog, secrets=secrets)
    assert timeout_s * 0.8 < time.monotonic() - started < timeout_s + 0.7
    assert error.retryable is True
    return error


async def audio_before_failure(tts: TTS) -> tuple[list[bytes], ProviderError]:
    received: list[bytes] = []
    with pytest.raises(ProviderError) as caught:
        async for chunk in tts.synthesize(SENTENCE):
            received.append(chunk)
    return received, caught.value


async def assert_stopping_early_closes_promptly(
    tts: TTS, closed: Callable[[], asyncio.Event]
) -> None:
    """A barge-in: the listener takes one chunk, then closes; the server sees it leave."""
    audio = tts.synthesize(SENTENCE)
    assert isinstance(audio, AsyncGenerator)
    assert len(await anext(audio)) > 0
    started = time.monotonic()
    await audio.aclose()
    assert time.monotonic() - started < 0.5
    await asyncio.wait_for(closed().wait(), timeout=0.5)
