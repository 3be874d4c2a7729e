"""Draining this web process for a deploy: no session is dropped.

On SIGTERM (``platform_site.shutdown`` installs the handler under daphne):

1. ``/healthz`` answers 503 ``{"draining": true}`` and new WebSockets are refused with
   4503 (the browser library tries again), so a load balancer sends new sessions
   elsewhere;
2. every browser session is sent a ``reconnect`` event: its client opens a new
   connection at once and ``resume``s, and the process that takes the resume asks this
   one to hand the session over (the running turn and server tools finish, the final
   snapshot is written): every event once, in order, nothing lost; a session whose socket
   is already gone (waiting for a resume) is saved for one at once, not waited for;
3. a phone call's carrier stream cannot reconnect: the call is left to finish;
4. the process exits once no session is left, or when ``DRAIN_GRACE_S`` has passed:
   a browser session still here then is saved for a resume on any process; a phone call
   still running then is cut (its record: ended by a platform restart, 1012).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from realtime import records, resume

logger = logging.getLogger(__name__)

POLL_S = 0.1
PROGRESS_EVERY_S = 5.0
# At the grace period's end a session still here gets this long to finish its turn.
LAST_SETTLE_S = 2.0

_draining = False


def draining() -> bool:
    """Whether this process is shutting down (it takes no new session)."""
    return _draining


async def drain(*, grace_s: float) -> None:
    """Move every session off this process, waiting at most ``grace_s`` for them."""
    global _draining
    _draining = True
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    hosts = resume.hosts_live()
    logger.info("draining: %d sessions asked to reconnect elsewhere", len(hosts))
    await asyncio.gather(*(host.drain() for host in hosts), return_exceptions=True)
    # Polled: sessions leave through handovers, clean closes and phone calls ending alike.
    said_at = loop.time()
    while resume.hosts_busy() and loop.time() < deadline:
        await asyncio.sleep(POLL_S)
        if loop.time() - said_at >= PROGRESS_EVERY_S:
            said_at = loop.time()
            logger.info("draining: %d sessions still here", len(resume.hosts_live()))
    left = resume.hosts_live()
    if left:
        logger.warning("drain grace period over: %d sessions still here", len(left))
        await asyncio.gather(
            *(host.drain_ended(LAST_SETTLE_S) for host in left), return_exceptions=True
        )
    # Recordings of the sessions that ended or moved are sealed and stored before the exit.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(records.recordings_stored(), max(1.0, deadline - loop.time()))
    logger.info("drained")


def reset() -> None:
    """Tests: this process takes sessions again."""
    global _draining
    _draining = False
