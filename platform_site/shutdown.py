"""SIGTERM drains a web process instead of ending its sessions (``realtime.drain``).

daphne runs Twisted's asyncio reactor, whose own SIGTERM handler stops the server at
once, cancelling every connection. Once the reactor runs, the handler here takes SIGTERM
over: it drains (at most ``DRAIN_GRACE_S``), then stops the reactor; a second SIGTERM
stops it at once. SIGINT (Ctrl-C in a terminal) keeps Twisted's immediate stop, and so
does SIGKILL, which nothing can catch (docs/scaling.md, "Deploys"). Under uvicorn
(``WEB_SERVER=uvicorn``) ``platform_site.serve`` calls ``sigterm`` the same way.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from django.conf import settings

from realtime import drain

logger = logging.getLogger(__name__)

_draining: list[asyncio.Task[None]] = []


def drain_on_sigterm() -> None:
    """Under daphne: install the SIGTERM handler once the reactor runs (it installs its
    own as it starts). Other servers keep their own SIGTERM handling."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None:
        return
    reactor.callWhenRunning(_take_sigterm, reactor)


def _take_sigterm(reactor: Any) -> None:
    loop = asyncio.get_event_loop()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(sigterm, _reactor_stop(reactor))

    signal.signal(signal.SIGTERM, on_sigterm)


def _reactor_stop(reactor: Any) -> Callable[[], None]:
    def stop() -> None:
        if reactor.running:
            reactor.stop()

    return stop


def sigterm(stop: Callable[[], None]) -> None:
    """A SIGTERM, on the event loop: the first drains then calls ``stop``; a second calls it
    at once. Any server: daphne's reactor stop here, uvicorn's exit (``platform_site.serve``)."""
    if _draining:
        logger.warning("second SIGTERM: stopping now")
        stop()
        return
    logger.info("SIGTERM: draining for at most %g s", settings.DRAIN_GRACE_S)
    _draining.append(asyncio.ensure_future(_drain_then_stop(stop)))


async def _drain_then_stop(stop: Callable[[], None]) -> None:
    try:
        await drain.drain(grace_s=float(settings.DRAIN_GRACE_S))
    except Exception:
        logger.exception("drain failed; stopping")
    finally:
        stop()
