"""The web process: the ASGI application under the server ``WEB_SERVER`` names.

    python -m platform_site.serve [--host 127.0.0.1] [--port 8000]

``daphne`` (the default, the server the project documents) runs as ``daphne -b HOST -p
PORT platform_site.asgi:application`` would. ``uvicorn`` runs it on uvloop with httptools'
HTTP parser and the ``websockets`` library's framing, whose unmasking is in C: about half
of daphne's CPU per WebSocket message (docs/capacity.md, "The WebSocket server"). It is
set up here to hold what daphne holds for the platform:

- a message or frame past 1 MiB closes the socket (daphne's limit), and no compression
  is negotiated (daphne offers none: a compressed flood would cost CPU to inflate);
- a request's line and headers past 16 KiB are refused (400), as Twisted refuses them,
  and a head not complete 10 s after its first byte closes the connection
  (``platform_site/uvicorn_http.py``: httptools bounds neither);
- idle sockets are pinged every 20 s and closed 30 s after an unanswered ping;
- the client address is the socket's: the platform reads ``X-Forwarded-For`` itself, from
  ``TRUSTED_PROXIES`` only (``core/client_address.py``); the server believes no header;
- SIGTERM drains the process (``platform_site.shutdown``, ``realtime/drain.py``) before the
  server stops; a second SIGTERM stops it at once;
- a request body past its limit is refused by ``BodyLimit`` (uvicorn stops reading a body
  the application has not asked for past 64 KB, so none is held); a response waits for a
  slow client (uvicorn's own flow control); its access log goes through ``logging``,
  where recording URLs are masked (``LOGGING`` in settings).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
from types import FrameType

import uvicorn

from platform_site.uvicorn_http import BoundedHttpToolsProtocol

APPLICATION = "platform_site.asgi:application"
SERVERS = ("daphne", "uvicorn")
WS_MAX_BYTES = 1024 * 1024  # daphne's websocket_max_message_size and _frame_size
WS_PING_INTERVAL_S, WS_PING_TIMEOUT_S = 20.0, 30.0  # daphne's ping_interval, ping_timeout
# What a connection still open once the drain is over gets to finish (daphne's
# application_close_timeout).
CLOSE_TIMEOUT_S = 10


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    options = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
    from django.conf import settings

    if settings.WEB_SERVER == "uvicorn":
        _run_uvicorn(options.host, options.port)
    else:
        from daphne.cli import CommandLineInterface

        CommandLineInterface().run(["-b", options.host, "-p", str(options.port), APPLICATION])


def _run_uvicorn(host: str, port: int) -> None:
    config = uvicorn.Config(
        APPLICATION, host=host, port=port, loop="uvloop", http=BoundedHttpToolsProtocol,
        ws="websockets",
        lifespan="off", log_config=None, proxy_headers=False, server_header=False,
        ws_max_size=WS_MAX_BYTES, ws_per_message_deflate=False,
        ws_ping_interval=WS_PING_INTERVAL_S, ws_ping_timeout=WS_PING_TIMEOUT_S,
        timeout_graceful_shutdown=CLOSE_TIMEOUT_S,
    )  # fmt: skip
    _DrainingServer(config).run()


class _DrainingServer(uvicorn.Server):
    """uvicorn's server, whose SIGTERM drains the sessions first (``shutdown.sigterm``)."""

    _loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig != signal.SIGTERM or self._loop is None:
            super().handle_exit(sig, frame)
            return
        from platform_site import shutdown

        # Not recorded for uvicorn to raise again at the end: a drained process exits 0,
        # as daphne's does.
        self._loop.call_soon_threadsafe(shutdown.sigterm, self._stop)

    def _stop(self) -> None:
        if self.should_exit:  # a second stop: no waiting for the connections
            self.force_exit = True
        self.should_exit = True


if __name__ == "__main__":
    main()
