"""Under daphne, what a socket is sent goes out at the end of the event loop's step,
without registering the socket with the loop for writing.

Twisted buffers every ``transport.write`` and registers the socket with the event loop for
writing; the loop's next step sends the buffer and unregisters it. Every event a session
sent thus cost two ``epoll_ctl`` calls and a trip through Twisted's reactor (a tenth of a
loaded web process's time, measured in ``docs/capacity.md``). Here the first write to an
idle TCP connection schedules one send for the end of the step (``call_soon``): what the
connection is sent in the same step still goes in one ``send``, as before, and whatever the
socket does not take (a full buffer, a slow client) is left to Twisted, registered as
before. A connection with TLS, a pull producer, or a close under way is always Twisted's;
a push producer (daphne's HTTP channel, which pauses a paced response and the socket's
reading) is paused past Twisted's buffer size and resumed once it is sent, as Twisted does.
The order of the bytes, back-pressure and errors stay Twisted's.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

_DUE = "_platform_send_due"  # a send is scheduled for the end of this step


def _ours(connection: Any) -> bool:
    """Whether this connection's writes may skip the reactor: plain TCP, open, nothing
    of Twisted's waiting to be written, no pull producer."""
    return not (
        connection.TLS
        or not connection.connected
        or connection.disconnecting
        or connection._writeDisconnected
        or (connection.producer is not None and not connection.streamingProducer)
        or connection.offset != len(connection.dataBuffer)
    )


def _write_soon(self: Any, data: bytes) -> None:
    if not getattr(self, _DUE, False):
        if not isinstance(data, bytes) or not data or self._tempDataLen or not _ours(self):
            self._twisted_write(data)  # its checks, its buffer, its registration
            return
        try:
            asyncio.get_running_loop().call_soon(_send, self)
        except RuntimeError:  # not on the loop (never under daphne): Twisted's own way
            self._twisted_write(data)
            return
        setattr(self, _DUE, True)
    elif not isinstance(data, bytes):
        self._twisted_write(data)  # raises, as Twisted does
    self._tempDataBuffer.append(data)
    self._tempDataLen += len(data)
    self._maybePauseProducer()  # as Twisted's write: past its buffer size, the reading pauses


def _send(connection: Any) -> None:
    setattr(connection, _DUE, False)
    if not connection._tempDataLen:
        return
    if not _ours(connection):  # closing, or it took a producer meanwhile: Twisted sends it
        if connection.connected:
            connection.startWriting()
        return
    data = b"".join(connection._tempDataBuffer)
    sent = connection.writeSomeData(data)
    if isinstance(sent, Exception):  # the connection is lost: the reactor's doWrite says so
        sent = 0
    if sent == len(data):
        connection._tempDataBuffer, connection._tempDataLen = [], 0
        if connection.producer is not None and connection.producerPaused:  # as doWrite
            connection.producerPaused = False
            connection.producer.resumeProducing()
        return
    connection._tempDataBuffer, connection._tempDataLen = [data[sent:]], len(data) - sent
    connection.startWriting()  # the rest is Twisted's: it resumes a paused producer itself


def send_at_step_end_in_daphne() -> None:
    """Under daphne (its server module loaded: we are its application), send what idle TCP
    connections are written at the end of the loop's step, without the reactor."""
    if "daphne.server" not in sys.modules:
        return
    from twisted.internet.tcp import Connection

    if getattr(Connection, "_twisted_write", None) is not None:
        return
    Connection._twisted_write = Connection.write  # type: ignore[attr-defined]
    Connection.write = _write_soon  # type: ignore[method-assign]
