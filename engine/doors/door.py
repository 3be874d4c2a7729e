"""The transport seam: what a door is, and what the engine side offers it.

A **door** is one way into a session: the browser's WebSocket, a carrier's media stream.
It implements ``Door``: it says what audio its line carries (``audio_in``, and
``audio_out`` for a given session), and takes what the session sends out: typed events
(``send_event``, each a ``protocol.Stamped``), audio already in its own format
(``send_audio``), and the close (``close``). Whether a lost connection may come back
(``resumable``), whether the session is a phone call (``call``: the door's
``CallControl``, which the system tool kinds use) and how much of the current reply its
peer has played by its own account (``played_ms``: a carrier's echoed marks; the session
cuts an interrupted reply to it, and estimates from its own clock when a door cannot
tell) are the door's to say.

The **host** (``DoorHost``) is the engine side a door drives: ``open`` with the door's
credentials, the caller's ``audio`` in the door's own format, ``control`` messages
(``protocol.ClientMessage``: configure, text, cancel, resume…) and ``closed``. The
realtime app's ``Connection`` is the host of every door on this platform; the audio in
between is converted once, by ``DoorAudio``, so a door never resamples or encodes.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import ClassVar, Protocol

from engine.doors.audio import SESSION_INPUT, AudioConverter, AudioEncoding, AudioFormat
from engine.doors.capture import AudioCapture
from engine.protocol import ClientMessage, Stamped

__all__ = [
    "AudioCapture", "CallControl", "CallControlError", "Door", "DoorAudio", "DoorHost",
]  # fmt: skip


class CallControlError(Exception):
    """A call control the carrier refused or that cannot be done; its text is for the LLM
    (fixed words: never what the carrier answered, which may quote numbers)."""


class CallControl(Protocol):
    """What a phone door can do to its call (the ``system`` tool kind's seam)."""

    async def end_call(self) -> None:
        """Hang up once what is being said has been heard."""

    async def send_dtmf(self, digits: str) -> None:
        """Play keypad tones into the call."""

    async def transfer(self, destination: str) -> None:
        """Hand the call to ``destination`` (E.164 or ``sip:``) and leave it; raises
        ``CallControlError`` when the carrier refuses."""


class Door(abc.ABC):
    """One transport a session is reached through (see the module)."""

    name: ClassVar[str]  # for logs: "browser", "twilio", "telnyx"
    audio_in: ClassVar[AudioFormat] = SESSION_INPUT
    resumable: ClassVar[bool] = False  # a lost connection may resume the session

    def audio_out(self, session_rate: int) -> AudioFormat:
        """What ``send_audio`` takes, for a session that speaks PCM16 at ``session_rate``."""
        return AudioFormat(AudioEncoding.PCM16, session_rate)

    @property
    def call(self) -> CallControl | None:
        """The phone call this door carries; None for a door that is not a call."""
        return None

    def use_encoding(self, name: str, *, session_id: str) -> None:
        """The event encoding the client asked for (``?protocol=``); ValueError if the door
        has no such encoding. A door with events of its own only knows ``v1``."""
        if name != "v1":
            raise ValueError(name)

    def played_ms(self) -> float | None:
        """How much of the reply being spoken (its audio since the first ``send_audio``
        after a ``tts_done``, ``cancelled``, ``turn`` or ``greeting`` event) the peer has
        played, by its own account; None: the door cannot tell."""
        return None

    def session_named(self, session_id: str) -> None:  # noqa: B027 (a default hook)
        """The door now carries the session ``session_id`` (a resume attached it)."""

    @abc.abstractmethod
    async def send_event(self, event: Stamped) -> None: ...

    @abc.abstractmethod
    async def send_audio(self, audio: bytes) -> None:
        """Audio to the door's peer, in ``audio_out``'s format."""

    @abc.abstractmethod
    async def close(self, code: int, reason: str) -> None:
        """Close the door's connection (``code``: a ``CloseCode`` as a plain number)."""


class DoorHost(Protocol):
    """The engine side of one door's connection, as the door drives it."""

    async def open(
        self, *, credentials: Mapping[str, str], origin: str | None, address: str
    ) -> None: ...

    async def audio(self, chunk: bytes) -> None:
        """The caller's audio, in the door's ``audio_in`` format."""

    async def control(self, message: ClientMessage) -> None: ...

    async def closed(self, code: int | None) -> None: ...


class DoorAudio:
    """A door's audio converted both ways: its ``audio_in`` to what the session hears, and
    what the session says (PCM16 at its TTS rate) to the door's ``audio_out``. A session
    that records its audio sets ``capture``: both sides reach it here, for every door."""

    def __init__(self, door: Door) -> None:
        self._door = door
        self._inbound = AudioConverter(door.audio_in, SESSION_INPUT)
        self._outbound: AudioConverter | None = None
        self.capture: AudioCapture | None = None

    def heard(self, chunk: bytes) -> bytes:
        """The caller's audio as the session takes it (empty while a filter fills)."""
        pcm = self._inbound(chunk)
        if self.capture is not None and pcm:
            self.capture.caller(pcm)
        return pcm

    async def say(self, pcm: bytes, *, session_rate: int) -> None:
        """The session's audio, converted, to the door (nothing while a filter fills)."""
        if self.capture is not None:
            self.capture.agent(pcm, rate=session_rate)
        outbound = self._outbound
        if outbound is None or outbound.source.rate != session_rate:
            source = AudioFormat(AudioEncoding.PCM16, session_rate)
            outbound = self._outbound = AudioConverter(source, self._door.audio_out(session_rate))
        audio = outbound(pcm)
        if audio:
            await self._door.send_audio(audio)
