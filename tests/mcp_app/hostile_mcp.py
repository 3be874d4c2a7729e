"""A hostile MCP server (raw ASGI, speaking streamable HTTP JSON-RPC and the SSE transport
by hand) on loopback, so every byte it answers is under the test's control."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp import types

Answer = Callable[[str, Any, dict[str, str]], Any]


def _init_result() -> dict[str, Any]:
    return {
        "protocolVersion": types.LATEST_PROTOCOL_VERSION,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "hostile", "version": "1"},
    }


@dataclass
class HostileServer:
    answer: Answer  # (method, params, headers) -> result dict (or raise)
    session_id: str = ""  # if set: stateful, and a DELETE hangs for hang_delete_s
    hang_delete_s: float = 0.0
    drip_s: float = 0.0  # answers to tools/call drip one byte every drip_s
    sse_endpoint: str = ""  # SSE transport: the endpoint event's data
    session_from_token: bool = False  # the credential it got, sent back as Mcp-Session-Id
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self._server: uvicorn.Server | None = None

    async def app(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        self.seen.append((scope["method"], scope["path"], headers))
        if self.session_from_token:
            self.session_id = headers.get("authorization", "").removeprefix("Bearer ")
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        if scope["method"] == "DELETE":
            await asyncio.sleep(self.hang_delete_s)
            return await self._send(send, 200, b"", "text/plain")
        if scope["method"] == "GET" and scope["path"] == "/sse":
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            await send(
                {
                    "type": "http.response.body",
                    "more_body": True,
                    "body": f"event: endpoint\ndata: {self.sse_endpoint}\n\n".encode(),
                }
            )
            await asyncio.sleep(30)
            return None
        if scope["method"] == "GET":
            return await self._send(send, 405, b"", "text/plain")
        message = json.loads(body)
        if "id" not in message:
            return await self._send(send, 202, b"", "text/plain")
        method = message["method"]
        if method == "initialize":
            result: Any = _init_result()
        else:
            result = self.answer(method, message.get("params"), headers)
        if isinstance(result, bytes):
            payload = result
        else:
            payload = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        if method == "tools/call" and self.drip_s:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            for byte in payload:
                await send({"type": "http.response.body", "body": bytes([byte]), "more_body": True})
                await asyncio.sleep(self.drip_s)
            await send({"type": "http.response.body", "body": b""})
            return None
        extra = [(b"mcp-session-id", self.session_id.encode())] if self.session_id else []
        return await self._send(send, 200, payload, "application/json", extra)

    async def _send(
        self,
        send: Any,
        status: int,
        body: bytes,
        ctype: str,
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", ctype.encode()), *(extra or [])],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def start(self) -> HostileServer:
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", interface="asgi3"
        )
        self._server = uvicorn.Server(config)
        threading.Thread(target=self._server.run, daemon=True).start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("hostile server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
