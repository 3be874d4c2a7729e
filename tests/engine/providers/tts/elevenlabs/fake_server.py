"""A fake of ElevenLabs' ``/v1/text-to-speech/{voice_id}/stream-input`` WebSocket, and
of its multi-context sibling ``multi-stream-input`` (see ``_converse_contexts``).

It follows the API reference: the key comes in the ``xi-api-key`` header (or the first
message), the first message is ``{"text": " "}`` with optional settings, text messages add
to a buffer that ``flush`` or the closing ``{"text": ""}`` turns into audio, audio arrives
as ``{"audio": base64, "isFinal": null, "normalizedAlignment": …, "alignment": …}``, then
``{"isFinal": true}`` and a normal close. Failures are sent the way ElevenLabs does: a
``{"message", "error", "code": 1008}`` message, then a close with code 1008::

    async with FakeElevenLabsServer(api_key="xi-key") as server:
        tts = ElevenLabsTTS(api_key="xi-key", base_url=server.url)
        server.inject(ErrorMessage("Quota exceeded.", "quota_exceeded", after_frames=1))
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request

from tests.fakes.ws_server import FRAMES, MS_PER_CHARACTER, Connection, FakeWebSocketServer

DEFAULT_VOICE = "JBFqnCBsd6RMkjVDRZzb"
PATH = re.compile(r"/v1/text-to-speech/([^/]+)/(stream-input|multi-stream-input)")
MAX_CONTEXTS = 5  # per connection, as ElevenLabs allows
CONTEXT_FIELDS = {
    "text", "context_id", "flush", "close_context", "close_socket", "voice_settings",
    "generation_config", "xi-api-key",
}  # fmt: skip
FIRST_FIELDS = {
    "text",
    "voice_settings",
    "generation_config",
    "pronunciation_dictionary_locators",
    "xi-api-key",
    "authorization",
}
TEXT_FIELDS = {"text", "try_trigger_generation", "voice_settings", "generator_config", "flush"}
# Verbatim from ElevenLabs (elevenlabs/elevenlabs-python issue #167).
UNPARSABLE = (
    "Could not parse input message, make sure it is a json and follows the schema outlined "
    "in protocol."
)


@dataclass(frozen=True)
class ErrorMessage:
    """ElevenLabs' in-band failure after ``after_frames`` frames, then a 1008 close."""

    message: str
    error: str
    after_frames: int = 0


class FakeElevenLabsServer(FakeWebSocketServer):
    garbage = "Internal Server Error"  # not JSON

    def __init__(
        self,
        *,
        api_key: str = "xi-test-key",
        voices: tuple[str, ...] = (DEFAULT_VOICE,),
        frames: int = FRAMES,
    ) -> None:
        super().__init__(frames=frames)
        self.api_key = api_key
        self.voices = voices

    def reject(self, request: Request) -> tuple[int, str] | None:
        path = request.path.partition("?")[0]
        return None if PATH.fullmatch(path) else (404, "Not Found")

    async def misbehave(self, websocket: ServerConnection, fault: Any) -> None:
        if isinstance(fault, ErrorMessage):
            await self.fail(websocket, fault.message, fault.error)
        else:
            await super().misbehave(websocket, fault)

    async def fail(self, websocket: ServerConnection, message: str, error: str) -> None:
        await websocket.send(json.dumps({"message": message, "error": error, "code": 1008}))
        await websocket.close(1008, message)

    async def converse(self, websocket: ServerConnection, connection: Connection, fault: Any):
        if connection.path.endswith("/multi-stream-input"):
            await self._converse_contexts(websocket, connection, fault)
            return
        first = await self._message(websocket, connection, FIRST_FIELDS)
        if first is None:
            return
        if (connection.headers.get("xi-api-key") or first.get("xi-api-key")) != self.api_key:
            await self.fail(websocket, "Invalid API key", "invalid_api_key")
            return
        if first["text"] != " ":
            await self._refuse_input(websocket, "the first message must be a single space")
            return
        voice = PATH.fullmatch(connection.path)
        assert voice is not None
        if voice.group(1) not in self.voices:
            message = f"A voice with voice_id {voice.group(1)} was not found."
            await self.fail(websocket, message, "voice_not_found")
            return
        if await self._speak(websocket, connection, fault):
            final = {"audio": None, "isFinal": True, "normalizedAlignment": None, "alignment": None}
            await websocket.send(json.dumps(final))
            await websocket.close()

    async def _speak(self, websocket: ServerConnection, connection: Connection, fault: Any):
        """Buffer text until a flush or the end; False when a fault ended the connection."""
        buffered = ""
        while (message := await self._message(websocket, connection, TEXT_FIELDS)) is not None:
            buffered += message["text"]
            end = message["text"] == ""
            if (message.get("flush") or end) and buffered.strip():
                if not await self._generate(websocket, buffered.strip(), fault):
                    return False
                buffered, fault = "", None
            if end:
                return True
        return False

    async def _generate(
        self, websocket: ServerConnection, text: str, fault: Any, context_id: str | None = None
    ) -> bool:
        alignment = _alignment(text)

        async def send(frame: bytes) -> None:
            message = _audio_message(frame, alignment)
            if context_id is not None:
                message["contextId"] = context_id
            await websocket.send(json.dumps(message))

        return await self.speak(websocket, text, fault, send)

    # ------------------------------------------------------------ multi-stream-input

    async def _converse_contexts(
        self, websocket: ServerConnection, connection: Connection, fault: Any
    ) -> None:
        """Several utterances on one connection, each a context: ``{"text": " ",
        "context_id"}`` opens one, text and ``flush`` make audio tagged ``contextId``,
        ``close_context`` ends it with ``{"isFinal": true, "contextId"}``, ``{"text": ""}``
        keeps it alive, ``close_socket`` ends them all. The fault fires on the connection's
        first generation."""
        if connection.headers.get("xi-api-key") != self.api_key:
            await self.fail(websocket, "Invalid API key", "invalid_api_key")
            return
        voice = PATH.fullmatch(connection.path)
        if voice is None or voice.group(1) not in self.voices:
            message = f"A voice with voice_id {voice.group(1) if voice else ''} was not found."
            await self.fail(websocket, message, "voice_not_found")
            return
        buffers: dict[str, str] = {}
        while (message := await self._context_message(websocket, connection)) is not None:
            if message.get("close_socket"):
                for context_id in buffers:
                    await websocket.send(json.dumps(_final(context_id)))
                await websocket.close()
                return
            context_id = str(message.get("context_id") or "default")
            if context_id not in buffers and len(buffers) >= MAX_CONTEXTS:
                await self.fail(
                    websocket,
                    "Maximum simultaneous contexts per WebSocket connection exceeded (5).",
                    "max_active_conversations",
                )
                return
            buffers[context_id] = buffers.get(context_id, "") + str(message.get("text", ""))
            ending = bool(message.get("close_context"))
            if (message.get("flush") or ending) and buffers[context_id].strip():
                text, buffers[context_id] = buffers[context_id].strip(), ""
                if not await self._generate(websocket, text, fault, context_id):
                    return
                fault = None
            if ending:
                del buffers[context_id]
                await websocket.send(json.dumps(_final(context_id)))

    async def _context_message(
        self, websocket: ServerConnection, connection: Connection
    ) -> dict[str, Any] | None:
        raw = await self.receive(websocket, connection)
        message = _json(raw)
        if not isinstance(message, dict) or not set(message) <= CONTEXT_FIELDS:
            await self._refuse_input(websocket, f"not a multi-context message: {raw!r:.80}")
            return None
        if "text" in message and not isinstance(message["text"], str):
            await self._refuse_input(websocket, "text must be a string")
            return None
        return message

    async def _message(
        self, websocket: ServerConnection, connection: Connection, fields: set[str]
    ) -> dict[str, Any] | None:
        message = _json(await self.receive(websocket, connection))
        if not isinstance(message, dict) or not isinstance(message.get("text"), str):
            await self._refuse_input(websocket, "a message is not JSON with a text field")
            return None
        if not set(message) <= fields:
            await self._refuse_input(
                websocket, f"unexpected fields {sorted(set(message) - fields)}"
            )
            return None
        return message

    async def _refuse_input(self, websocket: ServerConnection, problem: str) -> None:
        self.protocol_errors.append(problem)
        await self.fail(websocket, UNPARSABLE, "invalid_input_message")


def _json(raw: str | bytes) -> Any:
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return None


def _final(context_id: str) -> dict[str, Any]:
    return {"isFinal": True, "contextId": context_id}


def _alignment(text: str) -> dict[str, list[Any]]:
    chars = list(text)
    return {
        "chars": chars,
        "charStartTimesMs": [i * MS_PER_CHARACTER for i in range(len(chars))],
        "charDurationsMs": [MS_PER_CHARACTER] * len(chars),
    }


def _audio_message(frame: bytes, alignment: dict[str, list[Any]]) -> dict[str, Any]:
    return {
        "audio": base64.b64encode(frame).decode(),
        "isFinal": None,
        "normalizedAlignment": alignment,
        "alignment": alignment,
    }
