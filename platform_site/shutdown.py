"""SIGTERM drains a daphne process instead of ending its sessions (``realtime.drain``).

daphne runs Twisted's asyncio reactor, whose own SIGTERM handler stops the server at
once, cancelling every connection. Once the reactor runs, the handler here takes SIGTERM
over: it drains (at most ``DRAIN_GRACE_S``), then stops the reactor; a second SIGTERM
stops it at once. SIGINT (Ctrl-C in a terminal) keeps Twisted's immediate stop, and so
does SIGKILL, which nothing can catch (docs/scaling.md, "Deploys").
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
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
        loop.call_soon_threadsafe(_sigterm, reactor)

    signal.signal(signal.SIGTERM, on_sigterm)


def _sigterm(reactor: Any) -> None:
    if _draining:
        logger.warning("second SIGTERM: stopping now")
        reactor.stop()
        return
    logger.info("SIGTERM: draining for at most %g s", settings.DRAIN_GRACE_S)
    _draining.append(asyncio.ensure_future(_drain_then_stop(reactor)))


async def _drain_then_stop(reactor: Any) -> None:
    try:
        await drain.drain(grace_s=float(settings.DRAIN_GRACE_S))
    except Exception:
        logger.exception("drain failed; stopping")
    finally:
        if reactor.running:
            reactor.stop()
