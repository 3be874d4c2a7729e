"""The media-stream door: a carrier's call audio in and out of a realtime session.

Twilio Media Streams and Telnyx's media streaming speak almost the same JSON over one
WebSocket: ``connected``, ``start`` (the call's ids and our custom parameters), ``media``
(base64 μ-law at 8 kHz), ``mark`` (a mark we sent, now played), ``dtmf``, ``stop``; to the
carrier ``media``, ``mark`` and ``clear``. A ``Dialect`` holds their differences.

``MediaStreamDoor`` is a door on the engine's transport seam (``engine.doors.Door``), the
browser's WebSocket being the other: its line carries μ-law at 8 kHz both ways (the seam's
``DoorAudio`` converts to and from what the session hears and says), it cannot resume (a
carrier's stream does not reconnect), and it is a call (``CallControl``: the ``system``
tool kind's ``end_call``, ``send_dtmf`` and ``transfer_call`` act on it). It opens the
session on the same host as the browser's (``realtime.connection.Connection``) with the
call's single-use token, so the agent, its server tools, limits, quotas, usage, records and
webhooks are the browser's. What is the phone's own:

- barge-in: the session's ``cancelled`` becomes ``clear`` (the carrier drops what it
  buffered); a ``mark`` follows every chunk of audio sent, naming the reply and how far
  into it the chunk ends, so ``played_ms`` says how much of the reply the caller heard (the
  carrier echoes a mark once it played what preceded it), and the session cuts an
  interrupted reply in its history to that, not to its own clock's estimate;
- keypad digits (DTMF) are gathered until a pause (or ``#``) and given to the LLM as one
  user message;
- browser tools cannot run on a phone: the browser kind refuses their calls with words
  the LLM reads (``engine.tools.browser``);
- ``end_call`` ends the call once the words being spoken have been heard (the mark after
  them comes back), ``send_dtmf`` plays keypad tones into the call, ``transfer_call``
  hands the call to the carrier's transfer (``call_control``), which ends the stream.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from channels.db import database_sync_to_async

from engine import protocol
from engine.doors.audio import AudioEncoding, AudioFormat, pcm_to_ulaw
from engine.doors.door import CallControl, CallControlError, Door
from realtime.connection import Connection
from telephony_app import call_control, calls
from telephony_app.models import PhoneCall
from telephony_app.services import number_masked

logger = logging.getLogger(__name__)

CARRIER_RATE = 8_000
CARRIER_AUDIO = AudioFormat(AudioEncoding.MULAW, CARRIER_RATE)
DTMF_PAUSE_S = 1.5  # digits typed closer than this together are one message
START_TIMEOUT_S = 10.0  # a stream that names no call by then is closed
DTMF_TONES = {  # (low, high) Hz of each key, ITU-T Q.23
    **{d: (697, f) for d, f in zip("123A", (1209, 1336, 1477, 1633), strict=True)},
    **{d: (770, f) for d, f in zip("456B", (1209, 1336, 1477, 1633), strict=True)},
    **{d: (852, f) for d, f in zip("789C", (1209, 1336, 1477, 1633), strict=True)},
    **{d: (941, f) for d, f in zip("*0#D", (1209, 1336, 1477, 1633), strict=True)},
}
END_CALL_GRACE_S = 30.0  # the call ends by then even if the last words never finish

SendJson = Callable[[dict[str, Any]], Awaitable[None]]
Close = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Dialect:
    """How one carrier spells the same media-stream messages."""

    carrier: str
    stream_id_key: str  # in every message of the stream
    params_key: str  # custom parameters, inside ``start``

    def call_id(self, start: dict[str, Any]) -> str:
        return str(start.get("callSid") or start.get("call_control_id") or "")

    def outbound(self, event: str, stream_id: str, **body: Any) -> dict[str, Any]:
        return {"event": event, self.stream_id_key: stream_id, **body}


TWILIO = Dialect(carrier="twilio", stream_id_key="streamSid", params_key="customParameters")
TELNYX = Dialect(carrier="telnyx", stream_id_key="stream_id", params_key="custom_parameters")
DIALECTS = {d.carrier: d for d in (TWILIO, TELNYX)}


def dtmf_pcm(digits: str) -> bytes:
    """Keypad tones at 8 kHz PCM16: 100 ms per key, 60 ms between keys."""
    t = np.arange(int(0.1 * CARRIER_RATE)) / CARRIER_RATE
    gap = np.zeros(int(0.06 * CARRIER_RATE))
    parts = []
    for digit in digits:
        low, high = DTMF_TONES[digit]
        parts += [0.35 * (np.sin(2 * np.pi * low * t) + np.sin(2 * np.pi * high * t)), gap]
    return bytes((np.concatenate(parts) * 32767 * 0.6).astype(np.int16).tobytes())


class MediaStreamDoor(Door, CallControl):
    """One carrier stream, one call, one session. The consumer hands in the carrier's text
    frames; ``send_json``/``close`` go back to the carrier. (Sandbox results go to the
    session host's own channel, not through the door.)"""

    name = "phone"
    audio_in = CARRIER_AUDIO
    resumable = False

    def __init__(
        self, *, dialect: Dialect, send_json: SendJson, close: Close, channel_name: str,
        url_token: str = "",
    ) -> None:  # fmt: skip
        self._dialect, self._send_json, self._close = dialect, send_json, close
        self._host = Connection(door=self, channel_name=channel_name)
        self._call: PhoneCall | None = None
        self._url_token = url_token  # the token in the stream's URL (Telnyx outbound)
        self._stream_id = ""
        self._reply = 0  # which reply the audio being sent belongs to (in the marks' names)
        self._reply_over = True  # the next audio sent begins a new reply
        self._sent_ms = 0.0  # audio sent to the carrier in the current reply
        self.heard_ms = 0.0  # of it, played to the caller (its last mark came back)
        self._digits: list[str] = []
        self._digits_task: asyncio.Task[None] | None = None
        self._started_at = 0.0
        self._ended = False
        self._ending: asyncio.Task[None] | None = None  # end_call: the grace period
        self._deadline = asyncio.create_task(self._start_deadline())

    # ---------------------------------------------------------------- the seam

    def audio_out(self, session_rate: int) -> AudioFormat:
        return CARRIER_AUDIO

    @property
    def call(self) -> CallControl:
        return self

    def played_ms(self) -> float | None:
        return self.heard_ms

    async def send_event(self, event: protocol.Stamped) -> None:
        match event.event:
            case protocol.ReadyEvent(session_id=session_id) if self._call is not None:
                await database_sync_to_async(calls.call_started)(
                    call=self._call, session_id=session_id
                )
            case protocol.CancelledEvent():
                await self._send_json(self._dialect.outbound("clear", self._stream_id))
                self._reply_over = True
            case protocol.TurnEvent() | protocol.GreetingEvent():
                self._reply_over = True
            case protocol.TtsDoneEvent():
                self._reply_over = True
                name = "reply-end"
                if self._ending is not None:  # the grace runs from when the rest has played
                    name = "call-end"
                    self._ending.cancel()
                    unplayed_s = max(0.0, self._sent_ms - self.heard_ms) / 1000
                    self._ending = asyncio.create_task(
                        self._end_after(END_CALL_GRACE_S + unplayed_s)
                    )
                await self._send_json(
                    self._dialect.outbound("mark", self._stream_id, mark={"name": name})
                )
            case protocol.ErrorEvent(code=code):
                logger.info("phone session error: code=%s", code)

    async def send_audio(self, audio: bytes) -> None:
        """μ-law to the carrier, then a mark naming the reply and how far into it the
        audio ends."""
        if self._reply_over:
            self._reply, self._reply_over = self._reply + 1, False
            self._sent_ms = self.heard_ms = 0.0
        self._sent_ms += len(audio) / CARRIER_RATE * 1000
        await self._send_media(audio)
        mark = {"name": f"ms:{self._reply}:{self._sent_ms:.0f}"}
        await self._send_json(self._dialect.outbound("mark", self._stream_id, mark=mark))

    async def _send_media(self, audio: bytes) -> None:
        payload = base64.b64encode(audio).decode()
        await self._send_json(
            self._dialect.outbound("media", self._stream_id, media={"payload": payload})
        )

    async def close(self, code: int, reason: str) -> None:
        logger.info("phone session closed: carrier=%s code=%s", self._dialect.carrier, code)
        await self._close()

    # ---------------------------------------------------------------- the call's controls

    async def end_call(self) -> None:
        if self._ending is None:
            self._ending = asyncio.create_task(self._end_after(END_CALL_GRACE_S))

    async def send_dtmf(self, digits: str) -> None:
        await self._send_media(pcm_to_ulaw(dtmf_pcm(digits)))  # no part of a reply

    async def transfer(self, destination: str) -> None:
        if self._call is None:
            return
        await database_sync_to_async(call_control.call_transfer)(
            call=self._call, destination=destination
        )

    # ---------------------------------------------------------------- from the carrier

    async def receive(self, text: str) -> None:
        try:
            message = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            return
        if not isinstance(message, dict):
            return
        event = message.get("event")
        body = message.get(event) if isinstance(event, str) else None
        body = body if isinstance(body, dict) else {}  # the event's own object, if any
        if event == "media" and self._call is not None:
            await self._caller_audio(body)
        elif event == "start" and self._call is None:
            await self._start(message)
        elif event == "mark":
            await self._mark_played(str(body.get("name", "")))
        elif event == "dtmf":
            await self._digit(str(body.get("digit", ""))[:1])
        elif event == "stop":
            await self._close()

    async def closed(self) -> None:
        """The carrier's socket closed: the call is over, and so is its session."""
        self._deadline.cancel()
        for task in (self._digits_task, self._ending):
            if task is not None:
                task.cancel()
        if self._ended:
            return
        self._ended = True
        await self._host.closed(1000)
        if self._call is not None:
            duration_ms = int((time.monotonic() - self._started_at) * 1000)
            await database_sync_to_async(calls.call_ended)(call=self._call, duration_ms=duration_ms)
            logger.info(
                "phone call ended: carrier=%s caller=%s seconds=%d",
                self._dialect.carrier, number_masked(self._call.caller), duration_ms // 1000,
            )  # fmt: skip

    async def _start(self, message: dict[str, Any]) -> None:
        start = message.get("start") or {}
        if not isinstance(start, dict):
            start = {}
        params = start.get(self._dialect.params_key) or start.get("customParameters")
        token = str(params.get("token", ""))[:256] if isinstance(params, dict) else ""
        token = token or self._url_token
        call = await database_sync_to_async(calls.stream_claim)(
            carrier=self._dialect.carrier, call_id=self._dialect.call_id(start), token=token
        )
        if call is None:
            logger.warning("phone stream refused: carrier=%s", self._dialect.carrier)
            await self._close()
            return
        self._deadline.cancel()
        self._call, self._started_at = call, time.monotonic()
        self._stream_id = str(message.get(self._dialect.stream_id_key) or "")
        await self._host.open(
            credentials={"token": token}, origin=None, address=calls.caller_address()
        )
        await self._host.control(protocol.ConfigureMessage(mode="voice"))

    async def _caller_audio(self, media: dict[str, Any]) -> None:
        if media.get("track", "inbound") not in ("inbound", "inbound_track"):
            return
        try:
            ulaw = base64.b64decode(str(media.get("payload", "")), validate=True)
        except ValueError:
            return
        if ulaw:
            await self._host.audio(ulaw)

    async def _mark_played(self, name: str) -> None:
        if name == "call-end" and self._ending is not None:
            self._ending.cancel()
            await self._hang_up()
        elif name.startswith("ms:"):
            # A mark of an earlier reply (a carrier echoes the marks it drops on ``clear``
            # too) says nothing about this one.
            reply, _, at = name[3:].partition(":")
            try:
                if int(reply) == self._reply:
                    self.heard_ms = max(self.heard_ms, min(float(at), self._sent_ms))
            except ValueError:
                pass

    async def _digit(self, digit: str) -> None:
        if not digit or digit not in "0123456789*#ABCD" or len(self._digits) >= 32:
            return
        self._digits.append(digit)
        if self._digits_task is not None:
            self._digits_task.cancel()
        self._digits_task = asyncio.create_task(
            self._digits_send(0 if digit == "#" else DTMF_PAUSE_S)
        )

    async def _digits_send(self, after_s: float) -> None:
        await asyncio.sleep(after_s)
        digits, self._digits = "".join(self._digits), []
        text = f"(The caller pressed these keys on the phone keypad: {digits})"
        await self._host.control(protocol.TextMessage(text=text))

    async def _start_deadline(self) -> None:
        await asyncio.sleep(START_TIMEOUT_S)
        await self._close()

    async def _end_after(self, grace_s: float) -> None:
        await asyncio.sleep(grace_s)
        await self._hang_up()

    async def _hang_up(self) -> None:
        """The agent ends the call: at the carrier where closing the stream would not
        (a Telnyx call placed through Call Control), then the stream."""
        if self._call is not None:
            try:
                await database_sync_to_async(call_control.call_hang_up)(call=self._call)
            except CallControlError:
                logger.warning("phone hang-up refused: carrier=%s", self._dialect.carrier)
        await self._close()
