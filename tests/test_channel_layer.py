"""The Redis channel layer: a consumer's cancelled wait always ends (sockets do not leak)."""

from __future__ import annotations

import asyncio

import pytest
from channels.exceptions import ChannelFull
from django.conf import settings

from platform_site.channel_layer import ResilientRedisChannelLayer

pytestmark = pytest.mark.redis


async def test_a_wait_cancelled_at_any_moment_ends_and_leaves_nothing_behind() -> None:
    # redis-py loses a cancel that lands while it starts a read (about 1-3 ms in); the
    # consumer of a socket refused that early used to wait on its channel forever.
    layer = ResilientRedisChannelLayer(hosts=[settings.REDIS_URL])
    outcomes = []
    for attempt in range(40):
        channel = await layer.new_channel()
        waiting = asyncio.create_task(layer.receive(channel))
        await asyncio.sleep(0.001 + (attempt % 10) * 0.0003)
        waiting.cancel()
        done, _ = await asyncio.wait({waiting}, timeout=2)
        outcomes.append(waiting.cancelled() if done else "still waiting")
    assert outcomes == [True] * 40
    await asyncio.sleep(1.5)  # the inner waits are cancelled until they end
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []


async def test_send_in_one_round_trip_keeps_order_capacity_and_local_channels() -> None:
    layer = ResilientRedisChannelLayer(hosts=[settings.REDIS_URL], capacity=3)
    local = await layer.new_channel()
    for n in range(3):
        await layer.send(local, {"type": "tool.result", "n": n})
    with pytest.raises(ChannelFull):
        await layer.send(local, {"type": "tool.result", "n": 3})
    received = [(await layer.receive(local))["n"] for _ in range(3)]
    assert received == [0, 1, 2]
    await layer.send("plain.channel", {"type": "x", "text": "é"})
    assert await layer.receive("plain.channel") == {"type": "x", "text": "é"}
