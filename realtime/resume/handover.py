"""Taking a session over from the web process that ran it.

The owner's channel is in the store (a lease it renews). We ask it to hand over on the
channel layer: a live owner answers at once (``session.handover_ack``), then again
when it has finished the running turn and tool calls and written its final snapshot
(``session.handover_done``). No answer within ``ACK_S`` means the owner is gone (killed):
its last snapshot is what we resume from. Either way the ownership changes hands only
through ``claim``, so two processes never both rebuild the same session.
"""

from __future__ import annotations

import asyncio
import logging

from channels.layers import get_channel_layer

from core.channel_messages import SessionHandover, encode
from engine.resume.store import ResumeStore
from realtime.resume.host import OWNER_TTL_S, new_channel

logger = logging.getLogger(__name__)

ACK_S = 1.0
DONE_MARGIN_S = 2.0


async def take_over(*, session_id: str, store: ResumeStore, wait_s: float) -> str | None:
    """Make this process the session's owner; its new channel, or None if another won."""
    channel = await new_channel()
    previous = await store.owner(session_id)
    if previous:
        await _ask_owner(previous, session_id, wait_s)
    claimed = await store.claim(session_id, owner=channel, previous=previous, owner_ttl=OWNER_TTL_S)
    return channel if claimed else None


async def _ask_owner(owner: str, session_id: str, wait_s: float) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    reply = await layer.new_channel()
    request = encode(SessionHandover(session_id=session_id, reply_channel=reply))
    try:
        await layer.send(owner, request)
        await asyncio.wait_for(layer.receive(reply), ACK_S)
    except TimeoutError:
        logger.info("session %s: its previous process is gone; resuming its snapshot", session_id)
        return
    except Exception as exc:
        logger.warning("session %s: handover request: %s", session_id, type(exc).__name__)
        return
    try:
        await asyncio.wait_for(layer.receive(reply), wait_s + DONE_MARGIN_S)
    except TimeoutError:
        logger.warning("session %s: the handover did not finish in time", session_id)
