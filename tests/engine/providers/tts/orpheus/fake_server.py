"""A fake of Baseten's Orpheus WebSocket truss (``orpheus-3b-websockets``) on a real socket.

As the truss does: the handshake needs ``Authorization: Api-Key <key>`` (else HTTP 401); the
first frame is JSON generation settings; text frames add words until ``__END__``; the
answer is binary PCM16 frames, then a normal close. The fake checks the settings' fields
and types, records every frame and speaks ``speech_pcm`` of the words joined by spaces::

    async with FakeOrpheusServer(api_key="key") as server:
        tts = OrpheusTTS(url=server.url, api_key="key")
        ...
        assert server.connections[0].received == ['{"voice": "tara", ...}', "Hi", "__END__"]
"""

from __future__ import annotations

import json
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request

from tests.fakes.ws_server import FRAMES, Connection, FakeWebSocketServer

END_OF_TEXT = "__END__"
NUMBER = (int, float)
SETTINGS: dict[str, tuple[type, ...]] = {
    "voice": (str,),
    "max_tokens": (int,),
    "buffer_size": (int,),
    "temperature": NUMBER,
    "top_p": NUMBER,
    "repetition_penalty": NUMBER,
}


class FakeOrpheusServer(FakeWebSocketServer):
    garbage = "DONE"  # a text frame, where the truss only ever sends audio

    def __init__(self, *, api_key: str = "orpheus-test-key", frames: int = FRAMES) -> None:
        super().__init__(frames=frames)
        self.api_key = api_key

    @property
    def url(self) -> str:
        return f"{super().url}/environments/production/websocket"

    def reject(self, request: Request) -> tuple[int, str] | None:
        if request.headers.get("Authorization") != f"Api-Key {self.api_key}":
            return 401, "Unauthorized"
        return None

    async def converse(self, websocket: ServerConnection, connection: Connection, fault: Any):
        problem = settings_problem(await self.receive(websocket, connection))
        if problem:
            await self.refuse(websocket, problem)
            return
        words: list[str] = []
        while (message := await self.receive(websocket, connection)) != END_OF_TEXT:
            if not isinstance(message, str):
                await self.refuse(websocket, "words must be text frames")
                return
            words.extend(message.split())
        if await self.speak(websocket, " ".join(words), fault, websocket.send):
            await websocket.close()  # the truss closes once the sentence is spoken


def settings_problem(first: str | bytes) -> str | None:
    try:
        settings = json.loads(first)
    except (TypeError, ValueError):
        return "the first frame is not JSON"
    if not isinstance(settings, dict) or set(settings) != set(SETTINGS):
        return f"the first frame must hold exactly {sorted(SETTINGS)}"
    for name, kinds in SETTINGS.items():
        value = settings[name]
        if not isinstance(value, kinds) or isinstance(value, bool):
            return f"{name} has the wrong type"
    return None
