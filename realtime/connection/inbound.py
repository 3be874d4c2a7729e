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

Under daphne the messages are taken as daphne queues them: its ``receive`` is its queue's
``get``, and that queue's ``put_nowait`` counts and keeps each message here instead, in the
same step of the loop. A client's ping and pong frames, which the server answers itself
and never hands over, are counted against the same budgets (``count_control_frame``): a
ping flood cost the process a pong for each, uncounted. Under any other server a task of
its own takes them from ``receive``: one more task switch for every message (about a
twentieth of a loaded web process's time at 200 sessions).
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


class _Budget:
    """A socket's message and byte budgets, taken together."""

    def __init__(self) -> None:
        self.messages, self.bytes = limits.InboundMessages(), limits.InboundBytes()

    def take(self, size: int, *, pending_messages: int, pending_bytes: int) -> str | None:
        refusal = self.messages.take(pending=pending_messages)
        return refusal or self.bytes.take(size, pending=pending_bytes)


class _Inbox:
    """Messages taken from daphne and counted, waiting for the consumer."""

    def __init__(self, send: Any) -> None:
        self._messages: deque[dict[str, Any]] = deque()
        self._ready = asyncio.Event()
        self._budget = _Budget()
        self._send = send
        self._closer: asyncio.Task[None] | None = None
        self.pending = 0  # bytes counted, not yet taken by the consumer
        self.flooded = False

    def take(self, message: dict[str, Any]) -> None:
        """One message from the server: counted and kept, or dropped past a budget."""
        if message.get("type") == "websocket.disconnect":
            self._put(message)
            self.close()  # the socket is closed already
        elif self.counted(_size(message)):  # else dropped: nothing of a flood is kept
            self._put(message)

    def counted(self, size: int) -> bool:
        """One message of ``size`` bytes (a ping or pong frame too) against the budgets:
        False once the socket is a flood (this message made it one, or an earlier did)."""
        if self.flooded:
            return False
        refusal = self._budget.take(
            size, pending_messages=len(self._messages), pending_bytes=self.pending
        )
        if refusal is not None:
            self._flood(refusal)
        return refusal is None

    def _put(self, message: dict[str, Any]) -> None:
        self._messages.append(message)
        self.pending += _size(message)
        self._ready.set()

    def _flood(self, reason: str) -> None:
        self.flooded = True
        self._messages.clear()  # what is queued is never handled: its memory goes now
        self.pending = 0
        self._put({"type": "websocket.flood", "reason": reason})
        self._closer = asyncio.get_running_loop().create_task(_close_later(self._send))

    async def get(self) -> dict[str, Any]:
        while not self._messages:
            self._ready.clear()
            await self._ready.wait()
        message = self._messages.popleft()
        self.pending -= _size(message)
        return message

    def close(self) -> None:
        if self._closer is not None:
            self._closer.cancel()


class InboundByteGate:
    def __init__(self, app: ASGI) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "websocket":
            await self.app(scope, receive, send)
            return
        inbox = _Inbox(send)
        queue = _daphne_queue(receive)
        pump = None
        if queue is not None:  # what daphne queued already, then each message as it comes
            while not queue.empty():
                inbox.take(queue.get_nowait())
            queue.put_nowait = inbox.take  # type: ignore[method-assign, assignment]
        else:
            pump = asyncio.create_task(_pump(receive, inbox))
        try:
            await self.app(scope, inbox.get, send)
        finally:
            inbox.close()
            if queue is not None:
                del queue.put_nowait  # daphne's own again (the instance attribute goes)
            if pump is not None:
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pump


def count_control_frame(queue: Any, size: int) -> bool:
    """A ping or pong frame on the socket whose daphne queue is ``queue``: whether it is
    within the socket's budgets (True while no gate counts that socket's messages yet)."""
    inbox = getattr(getattr(queue, "put_nowait", None), "__self__", None)
    return inbox.counted(size) if isinstance(inbox, _Inbox) else True


def _daphne_queue(receive: Any) -> asyncio.Queue[dict[str, Any]] | None:
    """daphne's queue, when ``receive`` is its ``get`` (daphne hands its queue's method)."""
    queue = getattr(receive, "__self__", None)
    if type(queue) is asyncio.Queue and getattr(receive, "__func__", None) is asyncio.Queue.get:
        return queue
    return None


async def _pump(receive: Any, inbox: _Inbox) -> None:
    while True:
        message = await receive()
        inbox.take(message)
        if message.get("type") == "websocket.disconnect":
            return


async def _close_later(send: Any) -> None:
    await asyncio.sleep(CLOSE_AFTER_S)
    # a plain int: daphne's autobahn refuses an IntEnum (a CloseCode) as a close code
    await send({"type": "websocket.close", "code": int(CloseCode.TOO_MANY)})
