"""The realtime WebSocket: frames in, frames out. Everything else is in the connection package."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

from channels.generic.websocket import AsyncWebsocketConsumer

from platform_site.client_address import client_address
from sessions_app.connection import Connection


def _header(scope: Mapping[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


class VoiceConsumer(AsyncWebsocketConsumer):
    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes stale database connections before every message, through a
        # thread hop: a third of the cost of an audio frame. Audio never touches the
        # database, and the code that does runs in database_sync_to_async, which cleans up
        # around each call itself.
        if message["type"] == "websocket.receive" and message.get("bytes") is not None:
            await self.connection.receive_bytes(message["bytes"])
        else:
            await super().dispatch(message)

    async def connect(self) -> None:
        # Accept first: a close code and an error event can only be sent on an open socket.
        await self.accept()
        self.connection = Connection(
            send_text=self._send_text,
            send_bytes=self._send_bytes,
            close=self._close,
            channel_name=self.channel_name,
        )
        query = dict(parse_qsl(self.scope.get("query_string", b"").decode("latin-1")))
        peer = (self.scope.get("client") or [None])[0]
        address = client_address(peer, _header(self.scope, b"x-forwarded-for"))
        await self.connection.open(
            query=query, origin=_header(self.scope, b"origin"), address=address
        )

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if bytes_data is not None:
            await self.connection.receive_bytes(bytes_data)
        elif text_data is not None:
            await self.connection.receive_text(text_data)

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "connection"):
            await self.connection.closed(code)

    async def tool_result(self, event: dict[str, Any]) -> None:  # sent by a sandbox worker
        self.connection.tool_result(event)

    async def _send_text(self, text: str) -> None:
        await self.send(text_data=text)

    async def _send_bytes(self, data: bytes) -> None:
        await self.send(bytes_data=data)

    async def _close(self, code: int, reason: str) -> None:
        await self.close(code=code, reason=reason)
