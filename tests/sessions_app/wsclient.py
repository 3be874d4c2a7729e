"""A small test client over channels' WebsocketCommunicator and the real ASGI app."""

from __future__ import annotations

import json
from typing import Any

from channels.testing import WebsocketCommunicator

from platform_site.asgi import application

LOCAL_ORIGIN = "http://localhost:3000"


class Client:
    def __init__(
        self, path: str, *, origin: str | None = LOCAL_ORIGIN, address: str | None = None
    ) -> None:
        headers = [(b"origin", origin.encode())] if origin else []
        self.ws = WebsocketCommunicator(application, path, headers=headers)
        if address is not None:  # the peer's address, as a server sees it
            self.ws.scope["client"] = (address, 50_000)
        self.events: list[dict[str, Any]] = []
        self.audio: list[bytes] = []
        self.close_code: int | None = None

    async def __aenter__(self) -> Client:
        connected, _ = await self.ws.connect(timeout=10)
        assert connected
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.disconnect()

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send_to(text_data=json.dumps(message))

    async def send_raw(self, text: str | None = None, data: bytes | None = None) -> None:
        await self.ws.send_to(text_data=text, bytes_data=data)

    async def next(self, timeout: float = 5) -> dict[str, Any] | None:
        """The next JSON event (audio is collected on the side); None once closed."""
        while True:
            output = await self._receive(timeout)
            if output is None or isinstance(output, dict):
                return output

    async def next_audio(self, timeout: float = 5) -> bytes:
        """The next audio frame (JSON events are collected on the side)."""
        while True:
            output = await self._receive(timeout)
            if output is None:
                raise AssertionError(f"closed ({self.close_code}) before audio: {self.events}")
            if isinstance(output, bytes):
                return output

    async def _receive(self, timeout: float) -> dict[str, Any] | bytes | None:
        output = await self.ws.receive_output(timeout)
        if output["type"] == "websocket.close":
            self.close_code = output.get("code")
            return None
        if output.get("bytes") is not None:
            self.audio.append(output["bytes"])
            return output["bytes"]  # type: ignore[no-any-return]
        event: dict[str, Any] = json.loads(output["text"])
        self.events.append(event)
        return event

    async def until(self, event_type: str, timeout: float = 5) -> dict[str, Any]:
        while (event := await self.next(timeout)) is not None:
            if event.get("type") == event_type:
                return event
        raise AssertionError(f"closed ({self.close_code}) before {event_type!r}: {self.events}")

    async def closed(self, timeout: float = 5) -> int | None:
        while await self.next(timeout) is not None:
            pass
        return self.close_code

    def types(self) -> list[str]:
        return [event["type"] for event in self.events]
