"""Counts a socket's messages and bytes as daphne hands them over, before the session
sees them.

The consumer handles one message at a time; a client sending frames faster than that
would have them queued in the web process (daphne's queue has no bound) long before the
consumer could count them. This wrapper takes each message from daphne at once, counts it
against the socket's message budget (``limits.InboundMessages``: tiny messages by the
hundred thousand are a flood too) and byte budget (``limits.InboundBytes``) and keeps it
for the consumer. Past either budget the socket is a flood: what is queued is dropped,
everything further is read and discarded (never kept), and the consumer is told first
(``websocket.flood``): the session ends with ``too_many_messages`` and close 4029, not
to be resumed. Should the consumer not get to it within ``CLOSE_AFTER_S``, this closes
the socket itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

from engine.protocol import CloseCode
from realtime import limits

CLOSE_AFTER_S = 2.0
ASGI = Any  # an ASGI application: (scope, receive, send) -> awaitable


def _size(message: dict[str, Any]) -> int:
    if message.get("type") != "websocket.receive":
        return 0
    return len(message.get("bytes") or b"") + len(message.get("text") or "")


class _Inbox:
    """Messages taken from daphne and counted, waiting for the consumer."""

    def __init__(self) -> None:
        self._messages: deque[dict[str, Any]] = deque()
        self._ready = asyncio.Event()
        self.pending = 0  # bytes counted, not yet taken by the consumer
        self.flooded = False

    @property
    def pending_messages(self) -> int:
        return len(self._messages)

    def put(self, message: dict[str, Any]) -> None:
        self._messages.append(message)
        self.pending += _size(message)
        self._ready.set()

    def flood(self, reason: str) -> None:
        self.flooded = True
        self._messages.clear()  # what is queued is never handled: its memory goes now
        self.pending = 0
        self.put({"type": "websocket.flood", "reason": reason})

    async def get(self) -> dict[str, Any]:
        while not self._messages:
            self._ready.clear()
            await self._ready.wait()
        message = self._messages.popleft()
        self.pending -= _size(message)
        return message


class _Budget:
    """A socket's message and byte budgets, taken together."""

    def __init__(self) -> None:
        self.messages, self.bytes = limits.InboundMessages(), limits.InboundBytes()

    def take(self, size: int, inbox: _Inbox) -> str | None:
        refusal = self.messages.take(pending=inbox.pending_messages)
        return refusal or self.bytes.take(size, pending=inbox.pending)


class InboundByteGate:
    def __init__(self, app: ASGI) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "websocket":
            await self.app(scope, receive, send)
            return
        inbox = _Inbox()
        pump = asyncio.create_task(_pump(receive, send, inbox, _Budget()))
        try:
            await self.app(scope, inbox.get, send)
        finally:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump


async def _pump(receive: Any, send: Any, inbox: _Inbox, budget: _Budget) -> None:
    closer: asyncio.Task[None] | None = None
    try:
        while True:
            message = await receive()
            if message.get("type") == "websocket.disconnect":
                inbox.put(message)
                return
            if inbox.flooded:
                continue  # read and dropped: daphne's queue stays empty
            refusal = budget.take(_size(message), inbox)
            if refusal is None:
                inbox.put(message)
                continue
            inbox.flood(refusal)
            closer = asyncio.create_task(_close_later(send))
    finally:
        if closer is not None:
            closer.cancel()


async def _close_later(send: Any) -> None:
    await asyncio.sleep(CLOSE_AFTER_S)
    # a plain int: daphne's autobahn refuses an IntEnum (a CloseCode) as a close code
    await send({"type": "websocket.close", "code": int(CloseCode.TOO_MANY)})
