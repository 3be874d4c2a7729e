"""The HTTP connection pools of the streaming adapters (LLM chat streams, OpenAI speech).

aiohttp, not httpx, on this path: doing the same wire work (a 36-chunk SSE stream and three
TTS requests per turn, 50 turns at once) it spent 0.08× httpx's CPU here
(``bench/http_clients.py``), and a web process's CPU is what bounds its sessions.

One pool per kind of provider and event loop, so that speech never queues behind long LLM
streams to the same host (OpenAI serves both from one base URL). Sized for the sessions a
web process carries (about 200): every live turn holds one LLM stream, and a sentence's
speech request overlaps the stream that wrote it.

Every pool dials through the egress guard (``egress.pinned_http``): its resolver looks a
name up once per connection and connects to the address it checked. A pool is kept per
policy, so a connection (or a cached lookup) made under one policy never serves another:
the platform's own URLs are dialled under ``egress.OPERATOR``, a workspace's under the
public-only policy it was given.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
from typing import Literal

import aiohttp

import egress
from egress.pinned_http import PinnedResolver

Pool = Literal["llm", "tts", "customer"]
# Connections at once, per process. "customer": LLM endpoints a workspace typed in, which
# may only be public addresses (the platform must not become a way into its own network).
LIMITS: dict[Pool, int] = {"llm": 400, "tts": 400, "customer": 200}
KEEPALIVE_S = 30.0  # an idle connection is kept this long for the next turn

_Key = tuple[Pool, egress.Policy, asyncio.AbstractEventLoop]
_SESSIONS: dict[_Key, aiohttp.ClientSession] = {}


def shared_session(pool: Pool, policy: egress.Policy = egress.OPERATOR) -> aiohttp.ClientSession:
    """This loop's session for ``pool`` under ``policy``; made on first use, kept for the
    process's life.

    Keyed by event loop: pooled sockets belong to the loop that opened them, and a session
    carried into another loop (a test's, a worker's) would hand out dead ones.
    """
    for key in [key for key in _SESSIONS if key[2].is_closed()]:
        del _SESSIONS[key]
    key = (pool, policy, asyncio.get_running_loop())
    session = _SESSIONS.get(key)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(
            limit=LIMITS[pool],
            limit_per_host=LIMITS[pool],
            keepalive_timeout=KEEPALIVE_S,
            resolver=PinnedResolver(policy),
        )
        # No cookie jar: nothing a provider sets may follow a request of another session.
        session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())
        _SESSIONS[key] = session
    return session


def timeout(timeout_s: float) -> aiohttp.ClientTimeout:
    """``timeout_s`` is the longest silence between two reads; connecting takes at most 10 s."""
    return aiohttp.ClientTimeout(total=None, sock_connect=min(timeout_s, 10.0), sock_read=timeout_s)


async def close_shared_sessions() -> None:
    """Close the pools opened on the running loop (process shutdown, test teardown)."""
    loop = asyncio.get_running_loop()
    for key in [key for key in _SESSIONS if key[2] is loop]:
        await _SESSIONS.pop(key).close()


@atexit.register
def _forget_at_exit() -> None:
    """A process that stops (SIGTERM) never awaits ``close``: drop the pools without the
    "unclosed session" errors aiohttp would log for each when they are collected."""
    for session in _SESSIONS.values():
        connector = session.connector
        session.detach()
        if connector is not None:
            with contextlib.suppress(Exception):
                connector._close()  # aiohttp's synchronous part of close()
    _SESSIONS.clear()
