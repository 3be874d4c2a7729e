"""The web server's own door (daphne): what a hostile client can do before the application
sees a request is bounded.

A request's line and headers past 16 KiB (or of more than 500 headers) are refused, and so
is one header that never ends, before the process holds more of it than that; a request
whose length is ambiguous (Content-Length and chunked, two lengths) is refused, never read
as two; a WebSocket message past 1 MiB closes its socket, however it is fragmented, and no
compression is negotiated; a client's address is the socket's, whatever
``X-Forwarded-For`` it sends (no proxy is trusted here), so the per-address session limit
holds; requests pipelined and never read hold little; the log names no token a URL carries.
(The same tests ran against uvicorn when it was measured beside daphne: docs/capacity.md.)
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import secrets
import select
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from engine.protocol import CloseCode, ErrorCode
from tests.faults.processes import (
    LISTEN_BACKLOG,
    LOCAL_ORIGIN,
    ROOT,
    Daphne,
    Platform,
    prepare_platform,
    until,
    wait_for,
)

pytestmark = pytest.mark.slow

ORIGIN = Origin(LOCAL_ORIGIN)
MESSAGE_MAX = 1024 * 1024
BODY_TIMEOUT_S = 3
HEAD_TIMEOUT_S = 3
CLOSING_HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daphne, Platform]]:
    var = tmp_path_factory.mktemp("doors") / "var"
    var.mkdir()
    platform = prepare_platform(var, redis_url="", llm_base_url="http://127.0.0.1:9/v1")
    platform.env["SESSIONS_PER_ADDRESS"] = "1"
    platform.env["LOG_LEVEL"] = "DEBUG"  # what a log at its most says is what is checked
    platform.env["HTTP_BODY_TIMEOUT_S"] = str(BODY_TIMEOUT_S)
    platform.env["HTTP_HEAD_TIMEOUT_S"] = str(HEAD_TIMEOUT_S)
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
    # uvicorn (websockets) says why (1009: message too big); autobahn drops the connection.
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


def _resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_header_that_never_ends_is_cut_off(web: tuple[Daphne, Platform]) -> None:
    """One header value sent at the loopback's speed: the parser keeps what it has read of
    a header until the header ends, so uvicorn grew by hundreds of megabytes and its loop
    was too busy copying to answer anyone (/healthz timed out) until the head's 10 s ran
    out. The connection is closed once the head passes its bound."""
    daphne, _ = web
    before = _resident_mb(daphne.pid)
    sent, chunk = 0, b"a" * 65536
    with _raw(daphne) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Endless: ")
        with pytest.raises((BrokenPipeError, ConnectionResetError)):
            while sent < 64 * 1024 * 1024:
                sock.sendall(chunk)
                sent += len(chunk)
    assert sent < 16 * 1024 * 1024, f"{sent} bytes of one header taken"
    assert _resident_mb(daphne.pid) - before < 32
    assert daphne.alive() and daphne.healthz() == 200


def test_more_than_500_headers_are_refused(web: tuple[Daphne, Platform]) -> None:
    daphne, _ = web
    with _raw(daphne) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"a:\r\n" * 600 + b"\r\n")
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]


AMBIGUOUS_BODIES = {
    "content-length and chunked": b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
    "two lengths": b"Content-Length: 0\r\nContent-Length: 44\r\n",
    "a length in a list": b"Content-Length: 44, 44\r\n",
    "a signed length": b"Content-Length: +44\r\n",
    "chunked, then identity": b"Transfer-Encoding: chunked, identity\r\n",
    "a space before the colon": b"Transfer-Encoding : chunked\r\n",
}


@pytest.mark.parametrize("framing", AMBIGUOUS_BODIES.values(), ids=AMBIGUOUS_BODIES.keys())
def test_an_ambiguous_body_is_refused_not_read_as_two_requests(
    web: tuple[Daphne, Platform], framing: bytes
) -> None:
    """A proxy in front may read the body's length one way and the server another: the
    request hidden in the body would then reach the platform as a request of its own."""
    daphne, _ = web
    hidden = b"GET /healthz?smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    head = b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + framing + b"\r\n"
    with _raw(daphne) as sock:
        sock.sendall(head + b"0\r\n\r\n" + hidden)
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert answer.count(b"HTTP/1.1 ") == 1, answer


def test_pipelined_requests_are_answered_in_order(web: tuple[Daphne, Platform]) -> None:
    daphne, _ = web
    with _raw(daphne) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 49 + CLOSING_HEALTHZ)
        answer = _answer(sock)
    assert answer.count(b"HTTP/1.1 200 OK") == 50, answer[-300:]


def test_a_pipeline_never_read_holds_little(web: tuple[Daphne, Platform]) -> None:
    """Small requests sent ahead and no answer read: uvicorn parsed and queued every one it
    read, some 2 KB each (45 MB a connection, for 740 KB sent); Twisted leaves the bytes
    unparsed until the request before is answered."""
    daphne, _ = web
    before = _resident_mb(daphne.pid)
    socks = [_raw(daphne) for _ in range(4)]
    for sock in socks:
        sock.settimeout(2)
        with contextlib.suppress(TimeoutError, BrokenPipeError, ConnectionResetError):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 20000)
    time.sleep(2)
    grown = _resident_mb(daphne.pid) - before
    for sock in socks:
        sock.close()
    assert grown < 20, f"{grown:.0f} MB held for four connections"
    assert daphne.alive() and daphne.healthz() == 200


def _upgrade(
    daphne: Daphne,
    key: str,
    extra: bytes = b"",
    *,
    path: bytes = b"/v1/session",
    version: bytes = b"13",
) -> tuple[socket.socket, bytes]:
    sock = _raw(daphne)
    nonce = base64.b64encode(os.urandom(16))
    sock.sendall(
        b"GET " + path + b"?key=" + key.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: " + version
        + b"\r\n"
        b"Sec-WebSocket-Key: " + nonce + b"\r\nOrigin: " + LOCAL_ORIGIN.encode() + b"\r\n"
        + extra + b"\r\n"
    )  # fmt: skip
    head = b""
    while b"\r\n\r\n" not in head and (byte := sock.recv(1)):
        head += byte
    return sock, head


def _frame(opcode: int, payload: bytes, *, fin: bool = True) -> bytes:
    """A client's frame, masked with zeros (the mask is sent: any key is valid)."""
    first = (0x80 if fin else 0) | opcode
    if len(payload) < 126:
        return struct.pack("!BB", first, 0x80 | len(payload)) + bytes(4) + payload
    return struct.pack("!BBQ", first, 0x80 | 127, len(payload)) + bytes(4) + payload


def test_compression_is_never_negotiated(web: tuple[Daphne, Platform]) -> None:
    """A compressed message of a few kilobytes inflates to gigabytes (a deflate bomb)."""
    daphne, platform = web
    offer = b"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
    sock, head = _upgrade(daphne, platform.publishable_key, offer)
    sock.close()
    assert head.startswith(b"HTTP/1.1 101"), head
    assert b"sec-websocket-extensions" not in head.lower(), head


def test_fragments_past_1_mib_close_the_socket(web: tuple[Daphne, Platform]) -> None:
    """Each fragment under the limit, the message they make over it (and never finished).
    uvicorn says so (close 1009), daphne drops the connection."""
    daphne, platform = web
    sock, head = _upgrade(daphne, platform.publishable_key)
    assert head.startswith(b"HTTP/1.1 101"), head
    sent, answer = 0, b""
    with sock:
        sock.sendall(_frame(0x1, b"{", fin=False))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            while not select.select([sock], [], [], 0.01)[0] and sent < 4 * MESSAGE_MAX:
                sock.sendall(_frame(0x0, b" " * 65536, fin=False))
                sent += 65536
            answer = sock.recv(64)
    assert sent < 4 * MESSAGE_MAX, "4 MiB of one message taken"
    assert answer in (b"", b"\x88\x02\x03\xf1"), answer  # closed, or close 1009
    assert daphne.alive() and daphne.healthz() == 200


MALFORMED_FRAMES = {
    "invalid UTF-8 text": _frame(0x1, b'{"type": "configure", "x": "\xff\xfe"}'),
    "a length of 2**63-1": struct.pack("!BBQ", 0x81, 0xFF, 2**63 - 1) + bytes(4) + b"a" * 64,
    "unmasked": b"\x81\x05hello",
    "a reserved opcode": _frame(0x3, b"x"),
    "a ping past 125 bytes": b"\x89\xfe\x00\xc8" + bytes(4) + b"p" * 200,
}


@pytest.mark.parametrize("frame", MALFORMED_FRAMES.values(), ids=MALFORMED_FRAMES.keys())
def test_a_malformed_frame_closes_its_socket_only(
    web: tuple[Daphne, Platform], frame: bytes
) -> None:
    daphne, platform = web
    sock, head = _upgrade(daphne, platform.publishable_key)
    assert head.startswith(b"HTTP/1.1 101"), head
    received = b""
    with sock, contextlib.suppress(ConnectionResetError):
        sock.settimeout(5)  # a socket still open then fails the test
        sock.sendall(frame)
        while chunk := sock.recv(65536):
            received += chunk
    # uvicorn (websockets) says why: 1007 (not UTF-8), 1009 (too big), 1002 (protocol).
    assert received[-4:] in (b"", b"\x88\x02\x03\xef", b"\x88\x02\x03\xf1", b"\x88\x02\x03\xea")
    assert daphne.alive() and daphne.healthz() == 200


async def test_no_token_a_url_carries_nor_a_message_is_logged(
    web: tuple[Daphne, Platform],
) -> None:
    """A session token and a phone stream's token ride in a socket's query; a recording's,
    an email verification's, a password reset's and an invitation's in a path. uvicorn
    logged each socket's URL with its query (``"WebSocket /v1/session?token=st_…"
    [accepted]``), and at DEBUG its WebSocket library logged the handshake's URL and
    headers and every frame's text; both servers logged the dashboard's one-time links."""
    daphne, platform = web
    tokens = [secrets.token_urlsafe(16) for _ in range(7)]
    for url in (f"/v1/session?token=st_{tokens[0]}", f"/phone/telnyx/stream?token={tokens[1]}"):
        with contextlib.suppress(ConnectionClosed, TimeoutError):
            ws_url = f"ws://127.0.0.1:{daphne.port}{url}"
            async with connect(ws_url, origin=ORIGIN, proxy=None, open_timeout=10) as ws:
                await asyncio.wait_for(ws.recv(), 1)  # a refusal, or nothing yet
    typed = f"what the caller typed {secrets.token_urlsafe(8)}"
    url = daphne.session_url(platform.publishable_key)
    with contextlib.suppress(ConnectionClosed):  # the key may have its one session already
        async with connect(url, origin=ORIGIN, proxy=None, open_timeout=10) as ws:
            await ws.send(json.dumps({"type": "configure", "mode": "text", "instructions": typed}))
            await asyncio.wait_for(ws.recv(), 10)  # read: ready, or a refusal
    paths = [f"/recordings/{tokens[2]}?download=1", f"/verify-email/{tokens[3]}/",
             f"/password-reset/MQ/{tokens[4]}/", f"/invitations/{tokens[5]}/",
             f"/healthz?token={tokens[6]}"]  # fmt: skip
    async with httpx.AsyncClient(base_url=daphne.url, timeout=10) as client:
        for path in paths:
            await client.get(path)
    written = ["/recordings/…", "/verify-email/…/", "/password-reset/MQ/…/", "/invitations/…/"]
    await until(lambda: all(line in daphne.log_text() for line in written), timeout=10,
                what=f"the requests in the log\n{daphne.log_text()[-3000:]}")  # fmt: skip
    log = daphne.log_text()
    assert "/v1/session" in log and "/phone/telnyx/stream" in log
    assert not [token for token in tokens if token in log], log[-3000:]
    assert typed not in log


def test_an_unknown_websocket_path_is_refused_in_one_line(web: tuple[Daphne, Platform]) -> None:
    """No route: a refusal at the handshake (403), one log line, no traceback; channels'
    router raised instead, and daphne answered 500 and logged the traceback."""
    daphne, platform = web
    logged = len(daphne.log_text())
    sock, head = _upgrade(daphne, platform.publishable_key, path=b"/ws/nope")
    sock.close()
    assert head.startswith(b"HTTP/1.1 403"), head
    wait_for(lambda: "/ws/nope" in daphne.log_text()[logged:], timeout=10, what="the log line")
    written = daphne.log_text()[logged:]
    assert "Traceback" not in written and "Exception inside application" not in written, written
    refusals = [line for line in written.splitlines() if "no route for /ws/nope" in line]
    assert len(refusals) == 1 and " INFO " in refusals[0], written
    assert daphne.healthz() == 200


def test_only_websocket_version_13_is_spoken(web: tuple[Daphne, Platform]) -> None:
    """Version 8 (the last hybi draft) was accepted; RFC 6455 asks for a refusal that names
    the version spoken."""
    daphne, platform = web
    sock, head = _upgrade(daphne, platform.publishable_key, version=b"8")
    sock.close()
    assert head.startswith(b"HTTP/1.1 400"), head
    assert b"sec-websocket-version: 13\r\n" in head.lower(), head
    sock, head = _upgrade(daphne, platform.publishable_key)
    sock.close()
    assert head.startswith(b"HTTP/1.1 101"), head


def test_daphne_listens_with_the_deployed_backlog(web: tuple[Daphne, Platform]) -> None:
    """Twisted's default backlog is 50: past it, a burst of new connections (a deploy's
    reconnects, a load balancer's) waits on SYN retries, seconds each. The listening
    socket's backlog is what ``ss`` shows as its Send-Q; the kernel caps it at somaxconn."""
    daphne, _ = web
    for deployed in ("Dockerfile", "docker-compose.yml", "dev.sh"):
        assert f"backlog={LISTEN_BACKLOG}" in (ROOT / deployed).read_text(), deployed
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    listing = subprocess.run(
        ["ss", "-Hltn", f"sport = :{daphne.port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert int(listing[2]) == min(LISTEN_BACKLOG, somaxconn), listing


def _post_head(length: int) -> bytes:
    return (
        b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n" % length
    )


def _stalled_body(daphne: Daphne) -> tuple[bytes, float]:
    """Headers and 10 bytes of a 1,000-byte body, then nothing: the answer, and its time."""
    started = time.monotonic()
    with _raw(daphne) as sock:
        sock.sendall(_post_head(1000) + b"{" * 10)
        return _answer(sock), time.monotonic() - started


def _trickled_body(daphne: Daphne) -> tuple[bytes, float]:
    """A byte every half second (each resets Twisted's idle timeout)."""
    started = time.monotonic()
    with _raw(daphne) as sock:
        sock.sendall(_post_head(1000))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for _ in range(60):
                if select.select([sock], [], [], 0.5)[0]:
                    break
                sock.sendall(b"{")
        return _answer(sock), time.monotonic() - started


def _slow_upload(daphne: Daphne, behind: bytes = b"") -> bytes:
    """200 KB at 40 KB a second: past the timeout, but a body that keeps coming (its head
    sent in one write with ``behind``: a request it is pipelined behind)."""
    body = b"{" * (200 * 1024)
    with _raw(daphne) as sock:
        sock.sendall(behind + _post_head(len(body)))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for at in range(0, len(body), 4096):
                sock.sendall(body[at : at + 4096])
                time.sleep(0.1)
        return _answer(sock)


async def test_a_body_that_never_arrives_is_dropped_while_an_upload_goes_on(
    web: tuple[Daphne, Platform],
) -> None:
    """A POST's headers then a stalled or trickled body held its connection for as long as
    its client liked. Now 408 after HTTP_BODY_TIMEOUT_S (3 s here); a slower upload that
    keeps coming, at the same time, reaches the application (whose CSRF check answers 403)."""
    daphne, _ = web
    stalled, trickled, upload = await asyncio.gather(
        asyncio.to_thread(_stalled_body, daphne),
        asyncio.to_thread(_trickled_body, daphne),
        asyncio.to_thread(_slow_upload, daphne),
    )
    for answer, took in (stalled, trickled):
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert BODY_TIMEOUT_S <= took < BODY_TIMEOUT_S + 15, took  # 5 s of it: the linger
    assert upload.startswith(b"HTTP/1.1 403") and b"CSRF" in upload, upload[:200]
    assert daphne.alive() and daphne.healthz() == 200


def _trickled_head(daphne: Daphne) -> tuple[bytes, float]:
    """A head sent a byte every 0.4 s (each byte reset Twisted's 60 s idle timeout)."""
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    started = time.monotonic()
    with _raw(daphne) as sock:
        try:
            for byte in head:
                sock.sendall(bytes([byte]))
                time.sleep(0.4)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return _answer(sock), time.monotonic() - started


def _silent(daphne: Daphne) -> float:
    """A connection that sends nothing: how long the server keeps it."""
    started = time.monotonic()
    with _raw(daphne) as sock:
        assert _answer(sock) == b""
    return time.monotonic() - started


def _kept_alive(daphne: Daphne) -> tuple[list[bytes], float]:
    """Two requests on one connection, the second 1 s after the first's answer; then
    nothing: the answers, and how long the idle connection was kept after the second."""
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    answers = []
    with _raw(daphne) as sock:
        for _ in range(2):
            sock.sendall(request)
            answers.append(sock.recv(65536))
            time.sleep(1)
        idle_from = time.monotonic() - 1
        rest = _answer(sock)
    assert rest == b"", rest[:200]
    return answers, time.monotonic() - idle_from


async def test_a_head_that_never_arrives_is_cut_off_while_others_are_served(
    web: tuple[Daphne, Platform],
) -> None:
    """Slowloris: twenty heads trickled at once, and silent connections, held a place among
    the process's open files for as long as their client liked. Now a head must arrive
    within HTTP_HEAD_TIMEOUT_S (3 s here) of the connection or of the previous answer: a
    trickled one is answered 408, a silent or idle kept-alive one closed; meanwhile other
    clients are answered, a kept-alive connection serves its requests, and a WebSocket
    (its head arrived) lives on past the timeout."""
    daphne, platform = web
    loop = asyncio.get_running_loop()
    threads = ThreadPoolExecutor(max_workers=22)  # all at once (asyncio's default pool: 6)
    trickled = [loop.run_in_executor(threads, _trickled_head, daphne) for _ in range(20)]
    silent = loop.run_in_executor(threads, _silent, daphne)
    kept = loop.run_in_executor(threads, _kept_alive, daphne)
    # Not configured: it holds no session place (one per address here), and lives 10 s.
    async with connect(
        daphne.session_url(platform.publishable_key), origin=ORIGIN, proxy=None
    ) as ws:
        async with httpx.AsyncClient(base_url=daphne.url) as client:
            started = time.monotonic()
            served = await client.get("/healthz", timeout=10)
            assert served.status_code == 200 and time.monotonic() - started < 5
        results = await asyncio.gather(*trickled, silent, kept)
        await ws.send(json.dumps({"type": "ping", "t": 1}))
        while json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] != "pong":
            pass
    threads.shutdown()
    *heads, silent_for, (answers, idle_for) = results
    for answer, took in heads:
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert HEAD_TIMEOUT_S - 0.5 <= took < HEAD_TIMEOUT_S + 5, took
    assert HEAD_TIMEOUT_S - 0.5 <= silent_for < HEAD_TIMEOUT_S + 5, silent_for
    assert [answer.split(b"\r\n", 1)[0] for answer in answers] == [b"HTTP/1.1 200 OK"] * 2
    assert HEAD_TIMEOUT_S - 0.5 <= idle_for < HEAD_TIMEOUT_S + 5, idle_for
    assert daphne.alive() and daphne.healthz() == 200


async def test_a_pipelined_request_is_not_cut_by_the_head_timeout(
    web: tuple[Daphne, Platform],
) -> None:
    """The head timer restarted after the first answer even when the next head had already
    arrived (pipelined): 3 s later it cut the second request's upload (408 in the middle of
    it). Its head arrived in time: its body has the body's deadline only."""
    daphne, _ = web
    keep_alive = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    answer = await asyncio.to_thread(_slow_upload, daphne, keep_alive)
    assert answer.startswith(b"HTTP/1.1 200 OK"), answer[:300]
    assert b"HTTP/1.1 403 Forbidden" in answer and b"CSRF" in answer, answer[:600]
    assert b"HTTP/1.1 408" not in answer, answer[:600]
    assert daphne.alive() and daphne.healthz() == 200
