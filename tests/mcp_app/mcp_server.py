"""A real MCP server, built with the same SDK the platform's client uses, on loopback.

``McpTestServer`` serves FastMCP over streamable HTTP at ``/mcp`` and over SSE at
``/sse`` from a uvicorn thread, records what reached it (paths and headers), and can
redirect ``/moved/mcp`` anywhere. Its tools: ``echo``, ``add``, ``whoami`` (the
Authorization header it got), ``slow`` (sleeps), ``hang`` (never answers), ``fail``
(an MCP tool error), ``delete_everything`` (never on an allowlist in the tests).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send


@dataclass
class Seen:
    path: str
    headers: dict[str, str]


@dataclass
class McpTestServer:
    redirect_to: str = ""  # where /moved/... sends the client
    seen: list[Seen] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # tools called, in order

    def __post_init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def app(self) -> ASGIApp:
        mcp = FastMCP(
            "test tools",
            stateless_http=False,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        calls = self.calls

        @mcp.tool(description="Say the text back.")
        def echo(text: str) -> str:
            calls.append("echo")
            return text

        @mcp.tool(description="Add two numbers.")
        def add(a: float, b: float) -> dict[str, float]:
            calls.append("add")
            return {"sum": a + b}

        @mcp.tool(description="The Authorization header this server received.")
        def whoami(ctx: Context) -> str:  # type: ignore[type-arg]
            calls.append("whoami")
            request = ctx.request_context.request
            return request.headers.get("authorization", "") if request is not None else ""

        @mcp.tool(description="Answer after some seconds.")
        async def slow(seconds: float) -> str:
            calls.append("slow")
            await asyncio.sleep(seconds)
            return f"slept {seconds}"

        @mcp.tool(description="Never answer.")
        async def hang() -> str:
            calls.append("hang")
            await asyncio.sleep(3600)
            return "never"

        @mcp.tool(description="Fail.")
        def fail() -> str:
            calls.append("fail")
            raise ValueError("the database is read-only today")

        @mcp.tool(description="Delete every record.")
        def delete_everything() -> str:
            calls.append("delete_everything")
            return "deleted"

        streamable = mcp.streamable_http_app()
        sse = mcp.sse_app()
        return self._recording(streamable, sse)

    def _recording(self, streamable: ASGIApp, sse: ASGIApp) -> ASGIApp:
        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "lifespan":
                return await streamable(scope, receive, send)
            headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
            self.seen.append(Seen(scope["path"], headers))
            if scope["path"].startswith("/moved/"):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 307,
                        "headers": [(b"location", self.redirect_to.encode())],
                    }
                )
                await send({"type": "http.response.body", "body": b""})
                return None
            if scope["path"].startswith(("/sse", "/messages")):
                return await sse(scope, receive, send)
            return await streamable(scope, receive, send)

        return app

    def start(self) -> McpTestServer:
        config = uvicorn.Config(
            self.app(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the MCP test server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def headers_at(self, prefix: str) -> list[dict[str, Any]]:
        return [seen.headers for seen in self.seen if seen.path.startswith(prefix)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
