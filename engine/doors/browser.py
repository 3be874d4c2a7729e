"""The browser's door: the WebSocket of protocol v1 (docs/protocol.md).

Its events go out as JSON text frames in the encoding the page chose at connect time
(``?protocol=v1``, the default, or ``voiceide``: one event model, two codecs); its audio
is PCM16 both ways, 16 kHz in and the session's TTS rate out, so ``DoorAudio`` converts
nothing. A page that lost its socket may ``resume`` its session on a new one. The frames
themselves come and go through the Channels consumer, which hands this door the three
ways out (text, bytes, close).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from engine import protocol
from engine.doors.door import Door

SendText = Callable[[str], Awaitable[None]]
SendBytes = Callable[[bytes], Awaitable[None]]
Close = Callable[[int, str], Awaitable[None]]


class BrowserDoor(Door):
    name = "browser"
    resumable = True

    def __init__(self, *, send_text: SendText, send_bytes: SendBytes, close: Close) -> None:
        self._send_text, self._send_bytes, self._close = send_text, send_bytes, close
        self._codec: protocol.V1Codec | protocol.VoiceIDECodec = protocol.V1Codec()

    def use_encoding(self, name: str, *, session_id: str) -> None:
        self._codec = protocol.codec_for(name, session_id=session_id)

    def session_named(self, session_id: str) -> None:
        if isinstance(self._codec, protocol.VoiceIDECodec):
            self._codec.session_id = session_id

    async def send_event(self, event: protocol.Stamped) -> None:
        await self._send_text(self._codec.encode(event.to_wire()))

    async def send_audio(self, audio: bytes) -> None:
        await self._send_bytes(audio)

    async def close(self, code: int, reason: str) -> None:
        await self._close(int(code), reason)
