"""What a WebSocket handshake must be before any consumer sees it.

- A path no route serves is refused at the handshake (403: the socket is closed before it
  is accepted), with one log line; channels' router would raise instead, and daphne would
  answer 500 and log a traceback for every such request.
- Only RFC 6455 (``Sec-WebSocket-Version: 13``) is spoken. autobahn, under daphne, also
  accepts version 8 (the last hybi draft, which no browser has sent since 2012); it is
  refused with 400 and ``Sec-WebSocket-Version: 13``, as RFC 6455 (4.4) says.
- A client's ping and pong frames count against its socket's message and byte budgets
  (``realtime.connection.inbound``) like any message: autobahn answers a ping itself and
  logs a warning for an unasked-for pong, so a flood of them cost a pong, or a log line,
  each, without limit.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any, cast

from django.urls import re_path

from platform_site.log_masking import loggable_url
from realtime.connection.inbound import count_control_frame

if TYPE_CHECKING:
    from channels.routing import _ExtendedURLPattern

logger = logging.getLogger(__name__)

RFC6455 = 13


async def refuse_unknown_path(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The ASGI application behind every WebSocket path no route serves."""
    message = await receive()
    if message["type"] == "websocket.connect":
        logger.info("websocket refused: no route for %s", loggable_url(scope.get("path", "")))
        await send({"type": "websocket.close"})  # before accept: the server answers 403


def unknown_path_route() -> _ExtendedURLPattern:
    """The last WebSocket route: every path the routes before it did not take."""
    pattern = re_path(r"", refuse_unknown_path)  # type: ignore[arg-type]  # stubs expect a view
    return cast("_ExtendedURLPattern", pattern)


def rfc6455_only_in_daphne() -> None:
    """Under daphne (its server module loaded: we are its application), make its WebSocket
    factory speak version 13 only. The factory is built when the server runs, after the
    application is loaded: the class it is built from is replaced."""
    server: Any = sys.modules.get("daphne.server")
    if server is None or getattr(server.WebSocketFactory, "rfc6455_only", False):
        return
    server.WebSocketFactory = _rfc6455_only(server.WebSocketFactory)


def _rfc6455_only(base: type[Any]) -> type[Any]:
    class Rfc6455Factory(base):  # type: ignore[misc]
        rfc6455_only = True

        def setProtocolOptions(self, **options: Any) -> None:  # autobahn's name
            super().setProtocolOptions(**{**options, "versions": [RFC6455]})

    return Rfc6455Factory


def count_control_frames_in_daphne() -> None:
    """Under daphne, its WebSocket protocol counts a client's ping and pong frames."""
    if "daphne.server" not in sys.modules:
        return
    from daphne import ws_protocol

    if getattr(ws_protocol.WebSocketFactory.protocol, "counts_control_frames", False):
        return
    ws_protocol.WebSocketFactory.protocol = _counting(ws_protocol.WebSocketProtocol)


def _counting(base: type[Any]) -> type[Any]:
    class CountingProtocol(base):  # type: ignore[misc]
        counts_control_frames = True

        def processControlFrame(self) -> bool:  # autobahn's name
            opcode = self.current_frame.opcode
            if opcode in (9, 10):  # ping, pong
                parts: list[bytes] = getattr(self, "control_frame_data", None) or []
                size = sum(len(part) for part in parts)
                if not count_control_frame(getattr(self, "application_queue", None), size):
                    self.control_frame_data = None  # dropped unanswered: the socket is closing
                    return True
            return bool(super().processControlFrame())

    return CountingProtocol
