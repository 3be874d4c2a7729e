"""A tiny HTTP/1.1 server on 127.0.0.1 for the egress tests, scripted per path.

One request per connection (the server always answers ``Connection: close``), which
is all ``egress.fetch`` needs and keeps the fake honest about what reached it::

    async with EgressTestServer() as server:
        server.route("/a", redirect("/b"))
        server.route("/b", respond(200, b"done"))
        ...
        assert server.requests[-1].headers["host"] == "public.test:1234"

Pass an ``ssl.SSLContext`` to serve https; ``server.sni_names`` records the names
clients asked for in their TLS hello.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import TracebackType


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    target: str  # path and query, exactly as sent
    headers: dict[str, str]  # lower-case names
    body: bytes


Handler = Callable[["RecordedRequest", asyncio.StreamWriter, "EgressTestServer"], Awaitable[None]]


def _head(status: int, headers: Iterable[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} Scripted", "Connection: close", *(f"{n}: {v}" for n, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def respond(
    status: int = 200, body: bytes = b"", headers: Iterable[tuple[str, str]] = ()
) -> Handler:
    async def handler(
        request: RecordedRequest, writer: asyncio.StreamWriter, server: object
    ) -> None:
        writer.write(_head(status, [("Content-Length", str(len(body))), *headers]) + body)

    return handler


def redirect(location: str, status: int = 302) -> Handler:
    return respond(status, headers=[("Location", location)])


def echo() -> Handler:
    """Answers with the request's body, or its target when there is none."""

    async def handler(
        request: RecordedRequest, writer: asyncio.StreamWriter, server: object
    ) -> None:
        body = request.body or request.target.encode()
        writer.write(_head(200, [("Content-Length", str(len(body)))]) + body)

    return handler


def stream(total: int, *, declare_length: bool = False, chunk: int = 64 * 1024) -> Handler:
    """Sends ``total`` bytes; ``server.bytes_sent`` says how far it got before the client left."""

    async def handler(
        request: RecordedRequest, writer: asyncio.StreamWriter, server: EgressTestServer
    ) -> None:
        headers = [("Content-Length", str(total))] if declare_length else []
        writer.write(_head(200, headers))
        block = b"x" * chunk
        while server.bytes_sent < total:
            writer.write(block)
            await writer.drain()
            server.bytes_sent += len(block)

    return handler


def trickle(interval_s: float = 0.05) -> Handler:
    """One byte at a time, forever: no single read ever times out."""

    async def handler(
        request: RecordedRequest, writer: asyncio.StreamWriter, server: object
    ) -> None:
        writer.write(_head(200, [("Content-Length", "1000000")]))
        while True:
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(interval_s)

    return handler


def silent() -> Handler:
    async def handler(
        request: RecordedRequest, writer: asyncio.StreamWriter, server: object
    ) -> None:
        await asyncio.sleep(3600)

    return handler


class EgressTestServer:
    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Handler] = {}
        self.requests: list[RecordedRequest] = []
        self.sni_names: list[str | None] = []
        self.bytes_sent = 0
        self.port = 0
        self._ssl = ssl_context
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        if ssl_context is not None:
            ssl_context.sni_callback = self._record_sni

    def route(self, path: str, handler: Handler) -> None:
        self.routes[path] = handler

    def url(self, path: str = "/", host: str = "127.0.0.1", scheme: str = "http") -> str:
        return f"{scheme}://{host}:{self.port}{path}"

    async def __aenter__(self) -> EgressTestServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._ssl)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def _record_sni(self, sock: ssl.SSLObject, name: str | None, context: ssl.SSLContext) -> None:
        self.sni_names.append(name)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            request = await self._read_request(reader)
            handler = self.routes.get(request.target.split("?", 1)[0], respond(404))
            self.requests.append(request)
            await handler(request, writer, self)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # the client went away, which several tests want it to do
        except asyncio.CancelledError:
            pass  # shutting down; Python 3.11's stream callback chokes on cancelled tasks
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()

    @staticmethod
    async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        request_line, *header_lines = head.split("\r\n")
        method, target, _ = request_line.split(" ", 2)
        headers: dict[str, str] = {}
        for line in header_lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        body = await reader.readexactly(length) if length else b""
        return RecordedRequest(method, target, headers, body)
