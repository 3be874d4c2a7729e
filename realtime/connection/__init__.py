"""One realtime connection, from the handshake to the close, without Channels.

``Connection`` is the host of the transport seam (``engine.doors.DoorHost``): a door (the
browser's WebSocket, ``engine.doors.browser``; a carrier's media stream,
``telephony_app.door``) hands in audio and control messages and gets typed events, audio
in its own format and the close back through its ``Door``; everything else
(authorisation, connection rates, the configure deadline, building or resuming the
session, session limits) happens here, so it reads top to bottom and tests without a
socket where that helps. A socket that has not configured a session holds no
place in any session limit.

The session itself lives in a ``SessionHost`` (``realtime.resume``), which outlives
this connection: after an unclean close it waits for ``resume``, on this process or
another; a clean close (1000 from ``stop()``, 1001 from a page going away) ends it.

Modules, one job each: ``client`` (``Connection``: routes the client's messages, is the
session's sink, says refusals), ``handshake`` (who may open a socket), ``setup_leases`` (the
session-limit places a new session takes), ``starting`` (a new session from ``configure``),
``resuming`` (finding, taking over and rebuilding a session for ``resume``), ``building``
(a session and its host, put together), ``refusals`` (close codes and refusals).
"""

from __future__ import annotations

from realtime.connection.client import Connection
from realtime.connection.refusals import CLEAN_CLOSES, UNAVAILABLE, Refusal

__all__ = [
    "CLEAN_CLOSES",
    "UNAVAILABLE",
    "Connection",
    "Refusal",
]
