"""uvicorn's HTTP protocol (httptools) with the two bounds on a request's head it lacks.

httptools keeps no limit on a request line and its headers, and uvicorn times out only an
idle kept-alive connection: a client could send headers without end (held in memory per
connection), or trickle them a byte at a time and hold the connection for ever (a
slowloris). Twisted, under daphne, refuses a head over 16 KiB; here too, with a 400 and a
closed connection, and a head must also be complete within ``HEAD_TIMEOUT_S`` of its
first byte (or of the connection, for its first request), else the connection is closed.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEAD_MAX_BYTES = 16 * 1024  # Twisted's totalHeadersSize: the request line and headers
HEAD_TIMEOUT_S = 10.0


class HeadTooLarge(Exception):
    """Raised from the parser's callback: httptools reports it as a parser error, which
    uvicorn answers with a 400 and a closed connection."""


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    _head_bytes = 0
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._disarm_head_timer()
        super().on_headers_complete()

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > HEAD_MAX_BYTES:
            raise HeadTooLarge

    def _arm_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(HEAD_TIMEOUT_S, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()
