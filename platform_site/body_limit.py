"""The largest request body the platform accepts, refused before it is held in memory.

Every route takes ``HTTP_BODY_MAX_BYTES``; the upload routes (``HTTP_UPLOAD_PATHS``) take
``HTTP_UPLOAD_BODY_MAX_BYTES``, a document and its multipart wrapping. Two layers hold it:

- ``BodyLimit``, the ASGI middleware around the HTTP application: a declared
  ``Content-Length`` over the limit is answered 413 before the body is read, and a
  streamed (chunked) body is read no further than the limit. Under any ASGI server.
- ``refuse_early_in_daphne``: daphne receives the whole body (into a temporary file)
  before it calls the application, then queues all of it in memory at once, so the
  middleware alone would still see the web process grow by the body's size. Daphne's
  request class is replaced by one that answers 413 as soon as the declared length or the
  bytes received pass the limit, and drops the rest unread into memory.

The same request class bounds the time a body takes (``HTTP_BODY_TIMEOUT_S``): Twisted's
idle timeout (60 s without a byte) is reset by every byte, so a body trickled a byte at a
time, or a byte short of its length, held its connection (and a place among the process's
open files) for as long as its client liked. A body must arrive within the timeout, plus
1 s for every ``BODY_MIN_BYTES_PER_S`` received (a slow upload that keeps going gets the
time it needs); past that it is answered 408 and its connection closed.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote, urlsplit

from django.conf import settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Any, Any, Any], Awaitable[None]]  # Django's handler types its own

logger = logging.getLogger(__name__)
TIMEOUT_BODY = json.dumps({"detail": "The request body did not arrive in time."}).encode()
LINGER_S = 5.0  # reading (and dropping) a refused body, so the client gets to read the 413
BODY_MIN_BYTES_PER_S = 16 * 1024  # past the timeout, a body must keep coming this fast


def limit_for(path: str) -> int:
    """The most bytes a request body to ``path`` may hold."""
    if any(re.fullmatch(pattern, path) for pattern in settings.HTTP_UPLOAD_PATHS):
        return int(settings.HTTP_UPLOAD_BODY_MAX_BYTES)
    return int(settings.HTTP_BODY_MAX_BYTES)


def refusal(limit: int) -> bytes:
    megabytes = round(limit / (1024 * 1024), 1)
    return json.dumps({"detail": f"The request body is larger than {megabytes:g} MB."}).encode()


def body_deadline_s(received: int) -> float:
    """Seconds a body may take, ``received`` bytes of it in."""
    return float(settings.HTTP_BODY_TIMEOUT_S) + received / BODY_MIN_BYTES_PER_S


def _declared_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class BodyLimit:
    """ASGI middleware: 413 for a body over the path's limit, read no further than it."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = limit_for(scope["path"])
        declared = _declared_length(scope["headers"])
        if declared is not None and declared > limit:
            await _refuse(send, limit)
            return
        received, over, started = 0, False, False

        async def capped_receive() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:  # the application sees a client that went away
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, capped_receive, watched_send)
        if over and not started:
            await _refuse(send, limit)


async def _refuse(send: Send, limit: int) -> None:
    body = refusal(limit)
    await send({
        "type": "http.response.start", "status": 413,
        "headers": [(b"content-type", b"application/json"), (b"connection", b"close"),
                    (b"content-length", str(len(body)).encode())],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def refuse_early_in_daphne() -> None:
    """Under daphne (its server module loaded: we are its application), make its requests
    refuse an oversized body while it arrives."""
    if "daphne.server" not in sys.modules:
        return
    from daphne import http_protocol

    if getattr(http_protocol.WebRequest, "body_limited", False):
        return
    http_protocol.WebRequest = _limited_request(http_protocol.WebRequest)


def _limited_request(base: type[Any]) -> type[Any]:
    from twisted.internet import reactor

    clock: Any = reactor  # the installed reactor; its interface types it oddly

    class LimitedWebRequest(base):  # type: ignore[misc]
        body_limited = True

        def gotLength(self, length: int | None) -> None:  # Twisted's names
            target = getattr(self.channel, "_path", b"/") or b"/"
            self._body_limit = limit_for(unquote(urlsplit(target.decode("latin-1")).path))
            self._body_seen, self._body_refused = 0, False
            self._body_started = clock.seconds()
            self._body_timer = clock.callLater(body_deadline_s(0), self._body_overdue)
            if length is not None and length > self._body_limit:
                self._refuse_body(413, b"Content Too Large", refusal(self._body_limit))
                return
            super().gotLength(length)

        def handleContentChunk(self, data: bytes) -> None:
            if self._body_refused:
                return
            self._body_seen += len(data)
            if self._body_seen > self._body_limit:
                self._refuse_body(413, b"Content Too Large", refusal(self._body_limit))
                return
            super().handleContentChunk(data)

        def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
            self._stop_body_timer()
            if self._body_refused:  # the whole refused body has been dropped: done
                self._close()
                return
            super().requestReceived(command, path, version)

        def connectionLost(self, reason: Any) -> None:
            self._stop_body_timer()
            super().connectionLost(reason)

        def _body_overdue(self) -> None:
            self._body_timer = None
            waited = clock.seconds() - self._body_started
            more = body_deadline_s(self._body_seen) - waited
            if more > 0:  # the body kept coming: it has earned more time
                self._body_timer = clock.callLater(more, self._body_overdue)
                return
            logger.info("request body not received within %.0f s: 408", waited)
            self._refuse_body(408, b"Request Timeout", TIMEOUT_BODY)

        def _stop_body_timer(self) -> None:
            timer = getattr(self, "_body_timer", None)
            if timer is not None and timer.active():
                timer.cancel()
            self._body_timer = None

        def _refuse_body(self, status: int, reason: bytes, body: bytes) -> None:
            self._stop_body_timer()
            self._body_refused = True
            self.channel.transport.write(
                b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n" % (status, reason)
                + b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
                + body
            )  # fmt: skip
            clock.callLater(LINGER_S, self._close)

        def _close(self) -> None:
            if self.channel is not None and self.channel.transport is not None:
                self.channel.transport.loseConnection()

    return LimitedWebRequest
