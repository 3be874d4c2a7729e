"""The realtime WebSocket: frames in, frames out, through the browser's door
(``engine.doors.browser``). Everything else is in the connection package."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer

from core.client_address import client_address
from engine.doors.browser import BrowserDoor
from engine.protocol import CloseCode
from realtime.connection import Connection


def _header(scope: Mapping[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


class VoiceConsumer(AsyncWebsocketConsumer):
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # Channels' loop also waits on a channel of the layer (a new task and an
        # ``asyncio.wait`` for every frame); nothing is sent to this consumer through the
        # layer: its session listens on a channel of its own (``SessionHost``). So: the
        # socket's messages, one after the other.
        self.scope, self.base_send, self.channel_name = scope, send, ""
        with contextlib.suppress(StopConsumer):
            while True:
                await self.dispatch(await receive())

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes stale database connections before every message, through a
        # thread hop: a third of the cost of an audio frame, and a tenth of a loaded web
        # loop for the text messages (a ping a second per session). The socket's messages
        # never touch the database on the loop: the code that does runs in
        # database_sync_to_async, which cleans up around each call itself.
        if message["type"] == "websocket.receive":
            if (audio := message.get("bytes")) is not None:
                await self.connection.audio(audio)
            elif (text := message.get("text")) is not None:
                await self.connection.receive_text(text)
        else:
            await super().dispatch(message)

    async def connect(self) -> None:
        # Accept first: a close code and an error event can only be sent on an open socket.
        await self.accept()
        door = BrowserDoor(
            send_text=self._send_text, send_bytes=self._send_bytes, close=self._close
        )
        self.connection = Connection(door=door, channel_name=self.channel_name)
        query = dict(parse_qsl(self.scope.get("query_string", b"").decode("latin-1")))
        peer = (self.scope.get("client") or [None])[0]
        address = client_address(peer, _header(self.scope, b"x-forwarded-for"))
        await self.connection.open(
            credentials=query, origin=_header(self.scope, b"origin"), address=address
        )

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "connection"):
            await self.connection.closed(code)

    async def websocket_flood(self, message: dict[str, Any]) -> None:  # InboundByteGate
        if hasattr(self, "connection"):
            await self.connection.flooded(str(message.get("reason", "")))
        else:
            await self.close(code=int(CloseCode.TOO_MANY))

    async def _send_text(self, text: str) -> None:
        await self.send(text_data=text)

    async def _send_bytes(self, data: bytes) -> None:
        await self.send(bytes_data=data)

    async def _close(self, code: int, reason: str) -> None:
        # a plain int: daphne's autobahn refuses an IntEnum (a CloseCode) as a close code
        await self.close(code=int(code), reason=reason)
