"""A fake carrier that speaks Twilio Media Streams over a real WebSocket, as Twilio does
once a call's TwiML says ``<Connect><Stream>``.

It opens the stream, sends ``connected`` and ``start`` (call and stream ids, the custom
parameters of the TwiML), then one ``media`` frame of μ-law every 20 ms, as a live call
does: the caller's speech when ``say`` queued some, silence otherwise. What the platform
sends back is played in real time: ``media`` goes into a playback buffer, a ``mark`` is
echoed once the audio before it has played, ``clear`` drops the buffer (and echoes the
marks it dropped, as Twilio does). ``dtmf`` and ``stop`` are sent on request.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import subprocess
import tempfile
from collections import deque
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

FRAME = 160  # 20 ms of μ-law at 8 kHz
SILENCE = b"\xff" * FRAME  # μ-law for zero


def spoken_ulaw(text: str) -> bytes:
    """``text`` spoken by espeak-ng, as a phone line carries it (sox: 8 kHz μ-law)."""
    with tempfile.TemporaryDirectory() as folder:
        wav, raw = Path(folder) / "said.wav", Path(folder) / "said.ulaw"
        subprocess.run(["espeak-ng", "-s", "150", "-w", str(wav), text], check=True)
        subprocess.run(
            ["sox", str(wav), "-r", "8000", "-c", "1", "-e", "mu-law", "-t", "raw", str(raw)],
            check=True,
        )
        return raw.read_bytes()


def loudness(ulaw: bytes) -> float:
    """Root mean square amplitude (0..32767) of μ-law audio."""
    import audioop

    return float(audioop.rms(audioop.ulaw2lin(ulaw, 2), 2)) if ulaw else 0.0


class FakeTwilioCall:
    def __init__(self, url: str, *, call_sid: str, parameters: dict[str, str]) -> None:
        self.url, self.call_sid, self.parameters = url, call_sid, parameters
        self.stream_sid = "MZ" + call_sid[2:].ljust(32, "0")[:32]
        self.received: list[dict[str, Any]] = []  # every message from the platform
        self.arrivals: list[float] = []  # when each of them arrived (the loop's clock)
        self.said_sent = 0  # bytes of what the caller said that went out so far
        self._watches: list[tuple[int, asyncio.Future[float]]] = []
        self.heard = bytearray()  # the audio the caller heard (played, not cleared)
        self.clears = 0
        self._playback: deque[tuple[str, bytes | str]] = deque()
        self._to_say = bytearray()
        self._socket: ClientConnection | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.closed = asyncio.Event()

    async def __aenter__(self) -> FakeTwilioCall:
        self._socket = await connect(self.url, max_size=2**22)
        await self._send({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        await self._send({
            "event": "start", "sequenceNumber": "1", "streamSid": self.stream_sid,
            "start": {
                "accountSid": "AC" + "0" * 32, "streamSid": self.stream_sid,
                "callSid": self.call_sid, "tracks": ["inbound"],
                "customParameters": self.parameters,
                "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
            },
        })  # fmt: skip
        self._tasks = [
            asyncio.create_task(self._listen()),
            asyncio.create_task(self._caller()),
            asyncio.create_task(self._player()),
        ]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        if self._socket is not None:
            await self._socket.close()

    # ---------------------------------------------------------------- what the caller does

    def say(self, ulaw: bytes, *, then_silence_s: float = 0.0) -> None:
        self._to_say += ulaw + SILENCE * int(then_silence_s * 50)

    def when_sent(self, offset: int) -> asyncio.Future[float]:
        """When (the loop's clock) the frame holding byte ``offset`` of everything said on
        this call went out: how a benchmark times the caller's last word."""
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._watches.append((offset, future))
        return future

    @property
    def saying(self) -> bool:
        return bool(self._to_say)

    @property
    def playing(self) -> bool:
        """Audio from the platform is still waiting to be played."""
        return any(kind == "audio" for kind, _ in self._playback)

    async def dtmf(self, digit: str) -> None:
        await self._send({
            "event": "dtmf", "streamSid": self.stream_sid,
            "dtmf": {"track": "inbound_track", "digit": digit},
        })  # fmt: skip

    async def hang_up(self) -> None:
        await self._send({
            "event": "stop", "streamSid": self.stream_sid,
            "stop": {"accountSid": "AC" + "0" * 32, "callSid": self.call_sid},
        })  # fmt: skip

    def of_event(self, name: str) -> list[dict[str, Any]]:
        return [m for m in self.received if m.get("event") == name]

    # ---------------------------------------------------------------- the line

    async def _send(self, message: dict[str, Any]) -> None:
        assert self._socket is not None
        await self._socket.send(json.dumps(message))

    async def _caller(self) -> None:
        """A media frame every 20 ms, whatever the caller is doing."""
        loop = asyncio.get_running_loop()
        next_at, chunk = loop.time(), 0
        while True:
            frame = bytes(self._to_say[:FRAME]).ljust(FRAME, b"\xff")
            self.said_sent += min(FRAME, len(self._to_say))
            del self._to_say[:FRAME]
            chunk += 1
            await self._send({
                "event": "media", "sequenceNumber": str(chunk + 1), "streamSid": self.stream_sid,
                "media": {"track": "inbound", "chunk": str(chunk), "timestamp": str(chunk * 20),
                          "payload": base64.b64encode(frame).decode()},
            })  # fmt: skip
            for _offset, future in [w for w in self._watches if w[0] < self.said_sent]:
                if not future.done():
                    future.set_result(loop.time())
            self._watches = [w for w in self._watches if w[0] >= self.said_sent]
            next_at += 0.02
            await asyncio.sleep(max(0.0, next_at - loop.time()))

    async def _listen(self) -> None:
        assert self._socket is not None
        with contextlib.suppress(Exception):
            async for raw in self._socket:
                message = json.loads(raw)
                self.received.append(message)
                self.arrivals.append(asyncio.get_running_loop().time())
                event = message.get("event")
                if event == "media":
                    payload = base64.b64decode(message["media"]["payload"])
                    self._playback.append(("audio", payload))
                elif event == "mark":
                    self._playback.append(("mark", message["mark"]["name"]))
                elif event == "clear":
                    self.clears += 1
                    dropped = [v for kind, v in self._playback if kind == "mark"]
                    self._playback.clear()
                    for name in dropped:
                        await self._mark(str(name))
        self.closed.set()

    async def _player(self) -> None:
        """Plays what the platform sent in real time; echoes marks as Twilio does."""
        while True:
            if self._playback and self._playback[0][0] == "mark":
                await self._mark(str(self._playback.popleft()[1]))
                continue
            if self._playback:
                _, audio = self._playback.popleft()
                assert isinstance(audio, bytes)
                head, rest = audio[:FRAME], audio[FRAME:]
                if rest:
                    self._playback.appendleft(("audio", rest))
                self.heard += head
            await asyncio.sleep(0.02)

    async def _mark(self, name: str) -> None:
        with contextlib.suppress(Exception):
            await self._send(
                {"event": "mark", "streamSid": self.stream_sid, "mark": {"name": name}}
            )
