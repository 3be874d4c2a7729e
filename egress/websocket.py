"""WebSocket connections (``websockets``) to a URL under a policy, pinned to the vetted address.

The TCP connection is opened here (``guard.open_socket``) and handed to websockets as a
connected socket; for ``wss`` it does TLS on it with the URL's name as SNI and for the
certificate check. No proxy from the environment, no redirects (a 3xx answer is raised as
websockets' ``InvalidStatus``, like any other status): nothing can move the connection away
from the address that was checked.
"""

from __future__ import annotations

from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from egress.guard import Lookup, Policy, check, open_socket

SCHEMES = ("ws", "wss")


class _NoRedirects(connect):
    def process_redirect(self, exc: Exception) -> Exception | str:
        return exc


async def open_websocket(
    url: str,
    *,
    policy: Policy,
    open_timeout: float,
    resolver: Lookup | None = None,
    **options: Any,
) -> ClientConnection:
    """An open WebSocket to ``url``; ``options`` go to ``websockets.connect``.

    Raises InvalidURL, EgressRefused or EgressUnreachable (all but InvalidURL OSErrors)
    before anything is sent, and what ``websockets.connect`` raises after."""
    target = check(url, schemes=SCHEMES, policy=policy)
    sock = await open_socket(target, policy, timeout_s=open_timeout, resolver=resolver)
    if target.scheme == "wss":
        options["server_hostname"] = target.host
    try:
        return await _NoRedirects(
            target.url, sock=sock, proxy=None, open_timeout=open_timeout, **options
        )
    except BaseException:
        sock.close()
        raise
