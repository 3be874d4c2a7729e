"""Under daphne, a response body is sent no faster than the client takes it.

Daphne hands each ``http.response.body`` message to Twisted at once, and Twisted buffers
whatever the socket cannot take yet, without limit: a client that reads slowly, or not at
all, made the web process hold the whole response (a recording streamed to a paused
player: the whole WAV, per request). Here each request registers a push producer with
Twisted, which pauses it while the client's socket buffer is full, and ``handle_reply``
waits for it to resume before the application sends the next piece. A client that goes
away resumes it (daphne then cancels the application).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

_PACER = "_platform_pacer"


class _Pacer:
    """Twisted's push producer for one response: paused while the client's buffer is full."""

    def __init__(self) -> None:
        self.ready = asyncio.Event()
        self.ready.set()

    def pauseProducing(self) -> None:  # Twisted's names
        self.ready.clear()

    def resumeProducing(self) -> None:
        self.ready.set()

    def stopProducing(self) -> None:
        self.ready.set()


def _paced(request: Any, message: dict[str, Any]) -> _Pacer | None:
    """The request's pacer: registered as its response starts, dropped as it ends."""
    pacer: _Pacer | None = getattr(request, _PACER, None)
    kind = message.get("type")
    if kind == "http.response.start" and pacer is None and request.channel is not None:
        pacer = _Pacer()
        request.registerProducer(pacer, True)
        setattr(request, _PACER, pacer)
    elif kind == "http.response.body" and not message.get("more_body") and pacer is not None:
        setattr(request, _PACER, None)
        if request.channel is not None:
            request.unregisterProducer()
        return None
    return pacer


def pace_responses_in_daphne() -> None:
    """Under daphne (its server module loaded: we are its application), make every HTTP
    response body wait for the client to take what it was sent."""
    if "daphne.server" not in sys.modules:
        return
    from daphne.http_protocol import WebRequest
    from daphne.server import Server

    if getattr(Server.handle_reply, "paced", False):
        return
    reply = Server.handle_reply

    async def handle_reply(self: Server, protocol: Any, message: dict[str, Any]) -> None:
        pacer = _paced(protocol, message) if isinstance(protocol, WebRequest) else None
        await reply(self, protocol, message)
        if pacer is not None and message.get("type") == "http.response.body":
            await pacer.ready.wait()

    handle_reply.paced = True  # type: ignore[attr-defined]
    Server.handle_reply = handle_reply
