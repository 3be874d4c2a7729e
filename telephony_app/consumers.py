"""The carriers' media-stream WebSocket: frames in, frames out; the door does the rest."""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer

from engine.protocol import CloseCode
from telephony_app.door import DIALECTS, MediaStreamDoor

logger = logging.getLogger(__name__)


class MediaStreamConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        dialect = DIALECTS.get(self.scope["url_route"]["kwargs"]["carrier"])
        if dialect is None:
            await self.close()
            return
        await self.accept()
        self.door = MediaStreamDoor(
            dialect=dialect,
            send_json=self._send_json,
            close=self._close,
            channel_name=self.channel_name,
            url_token=_query_token(self.scope.get("query_string", b"")),
        )

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if text_data is not None and hasattr(self, "door"):
            await self.door.receive(text_data)

    async def websocket_flood(self, message: dict[str, Any]) -> None:  # InboundByteGate
        """More bytes than a call's audio can be: the stream is closed (its call ends)."""
        logger.warning("phone stream flooded: %s", message.get("reason", ""))
        await self.close(code=int(CloseCode.TOO_MANY))

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "door"):
            await self.door.closed()

    async def _send_json(self, message: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(message))

    async def _close(self) -> None:
        await self.close()


def _query_token(query_string: bytes) -> str:
    """The stream's token when its URL carries it (Telnyx Call Control's ``stream_url``)."""
    values = parse_qs(query_string.decode("latin-1")).get("token") or [""]
    return values[0][:256]
