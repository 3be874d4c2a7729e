"""Under daphne, a request's line and headers must arrive within ``HTTP_HEAD_TIMEOUT_S`` of
the connection opening (or, on a kept-alive connection, of the previous response).

Twisted's idle timeout (60 s without a byte) is reset by every byte, so a head trickled a
byte a minute (up to Twisted's 16 KiB line and 16 KiB of headers) held its connection, and
a place among the process's open files, for days: a few thousand such connections from
one client starve the process of sockets. The body has its own deadline
(``body_limit``); a WebSocket's head is bounded the same way before its upgrade.
Past the deadline a head that had begun is answered 408; an idle kept-alive connection
is just closed.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)


def bound_request_heads_in_daphne() -> None:
    """Under daphne (its server module loaded: we are its application), build its HTTP
    connections from a channel that bounds the time a head takes."""
    if "daphne.server" not in sys.modules:
        return
    from daphne import http_protocol

    if getattr(http_protocol.HTTPFactory, "heads_bounded", False):
        return
    from twisted.web import http

    http_protocol.HTTPFactory.protocol = _channel_factory(_head_bound(http.HTTPChannel))
    http_protocol.HTTPFactory.heads_bounded = True


def _channel_factory(channel: type[Any]) -> Any:
    from twisted.web.http import _GenericHTTPChannelProtocol

    def build(factory: Any) -> Any:  # Twisted's HTTPFactory.protocol, called bound
        return _GenericHTTPChannelProtocol(channel())

    return build


def _head_bound(base: type[Any]) -> type[Any]:
    body = b"The request head did not arrive in time.\n"
    overdue = (
        b"HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )

    class HeadBoundChannel(base):  # type: ignore[misc]
        _head_timer: Any = None
        _head_bytes = 0

        def connectionMade(self) -> None:  # Twisted's names
            super().connectionMade()
            self._await_head()

        def dataReceived(self, data: bytes) -> None:
            if self._head_timer is not None:
                self._head_bytes += len(data)
            super().dataReceived(data)

        def allHeadersReceived(self) -> None:
            self._stop_head_timer()
            super().allHeadersReceived()

        def requestDone(self, request: Any) -> None:
            # Kept alive: the next head is bounded too. The timer starts before Twisted
            # reads what was pipelined behind this request, so a head already there
            # stops it (started after, it cut that request 20 s on, whatever its body).
            self._await_head(pipelined=sum(len(part) for part in self._dataBuffer))
            super().requestDone(request)
            if self.transport is None or self.transport.disconnecting:
                self._stop_head_timer()

        def connectionLost(self, reason: Any) -> None:
            self._stop_head_timer()
            super().connectionLost(reason)

        def _await_head(self, pipelined: int = 0) -> None:
            self._stop_head_timer()
            self._head_bytes = pipelined
            self._head_timer = self.callLater(settings.HTTP_HEAD_TIMEOUT_S, self._head_overdue)

        def _stop_head_timer(self) -> None:
            if self._head_timer is not None and self._head_timer.active():
                self._head_timer.cancel()
            self._head_timer = None

        def _head_overdue(self) -> None:
            self._head_timer = None
            if self.transport is None:
                return
            if self._head_bytes:
                logger.info(
                    "request head not received within %s s: 408", settings.HTTP_HEAD_TIMEOUT_S
                )
                self.transport.write(overdue)
            self.transport.loseConnection()

    return HeadBoundChannel
