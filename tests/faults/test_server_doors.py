"""The web server's own door, on a real daphne: what a hostile client can do before the
application sees a request is bounded.

A request's line and headers past 16 KiB are refused (Twisted's limit); a WebSocket
message past 1 MiB closes its socket (daphne's); a client's address is the socket's,
whatever ``X-Forwarded-For`` it sends (no proxy is trusted here), so the per-address
session limit holds. Another ASGI server put in daphne's place must pass these too
(docs/capacity.md, "The WebSocket server").
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from engine.protocol import CloseCode, ErrorCode
from tests.faults.processes import (
    LOCAL_ORIGIN,
    Daphne,
    Platform,
    prepare_platform,
)

pytestmark = pytest.mark.slow

ORIGIN = Origin(LOCAL_ORIGIN)
MESSAGE_MAX = 1024 * 1024


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daphne, Platform]]:
    var = tmp_path_factory.mktemp("doors") / "var"
    var.mkdir()
    platform = prepare_platform(var, redis_url="", llm_base_url="http://127.0.0.1:9/v1")
    platform.env["SESSIONS_PER_ADDRESS"] = "1"
    daphne = Daphne(platform)
    yield daphne, platform
    daphne.stop()


def _raw(daphne: Daphne) -> socket.socket:
    return socket.create_connection(("127.0.0.1", daphne.port), timeout=30)


def _answer(sock: socket.socket) -> bytes:
    """What the server sent until it closed the connection (or 30 s passed)."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return received


def test_a_head_past_16_kib_is_refused(web: tuple[Daphne, Platform]) -> None:
    daphne, _ = web
    padding = b"".join(b"X-Pad-%d: %s\r\n" % (n, b"a" * 500) for n in range(80))  # 40 KB
    with _raw(daphne) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + padding + b"\r\n")
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert daphne.alive() and daphne.healthz() == 200


async def test_a_websocket_message_past_1_mib_closes_the_socket(
    web: tuple[Daphne, Platform],
) -> None:
    daphne, platform = web
    url = daphne.session_url(platform.publishable_key)
    async with connect(url, origin=ORIGIN, max_size=None, proxy=None) as ws:
        await ws.send(json.dumps({"type": "configure", "mode": "text"}))
        while json.loads(await ws.recv())["type"] != "ready":
            pass
        await ws.send(json.dumps({"type": "context", "text": "x" * (2 * MESSAGE_MAX)}))
        with pytest.raises(ConnectionClosed):
            while True:
                await ws.recv()
    # autobahn drops the connection (1006); a server that says why would send 1009
    assert ws.close_code in (1009, 1006)
    assert daphne.alive() and daphne.healthz() == 200


async def test_a_forwarded_for_header_is_not_the_clients_address(
    web: tuple[Daphne, Platform],
) -> None:
    """SESSIONS_PER_ADDRESS=1: a second session claiming another address through
    X-Forwarded-For is still this address's second session. (The other workspace's key: the
    oversized message's session is kept for a resume, and holds its key's place.)"""
    daphne, platform = web
    url = daphne.session_url(platform.outsider_key)
    claims = [{"X-Forwarded-For": "203.0.113.1"}, {"X-Forwarded-For": "203.0.113.2"}]
    events: list[dict[str, object]] = []
    async with connect(url, origin=ORIGIN, additional_headers=claims[0], proxy=None) as first:
        await first.send(json.dumps({"type": "configure", "mode": "text"}))
        while json.loads(await first.recv())["type"] != "ready":
            pass
        async with connect(url, origin=ORIGIN, additional_headers=claims[1], proxy=None) as second:
            with pytest.raises(ConnectionClosed):
                await second.send(json.dumps({"type": "configure", "mode": "text"}))
                while True:  # a session taken as another address's is never closed
                    events.append(json.loads(await asyncio.wait_for(second.recv(), 20)))
    codes = [event.get("code") for event in events]
    assert ErrorCode.TOO_MANY_SESSIONS_FROM_ADDRESS.value in codes, events
    assert second.close_code == CloseCode.TOO_MANY.value
