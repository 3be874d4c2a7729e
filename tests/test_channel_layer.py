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


async def test_a_layer_sharded_over_two_redis_servers_spreads_and_delivers(tmp_path) -> None:
    """``CHANNEL_LAYER_URL`` with two URLs: channels and groups spread over both servers,
    and every message reaches its channel (and every member of a group)."""
    import redis.asyncio as aioredis

    from tests.faults.processes import RedisServer

    servers = [RedisServer(tmp_path / f"shard-{n}") for n in range(2)]
    for n, server in enumerate(servers):
        (tmp_path / f"shard-{n}").mkdir()
        server.start()
    try:
        hosts = [server.url for server in servers]
        # Sixteen web processes: each its own layer, whose channels live on one shard
        # (all sixteen on one of two shards: 1 in 32768).
        layers = [ResilientRedisChannelLayer(hosts=hosts) for _ in range(16)]
        channels = [await layer.new_channel() for layer in layers]
        sender = layers[0]
        for n, channel in enumerate(channels):
            await sender.send(channel, {"type": "tool.result", "n": n})
        counts = []
        for server in servers:
            client = aioredis.Redis.from_url(server.url)
            counts.append(await client.dbsize())
            await client.aclose()
        assert all(count > 0 for count in counts), counts  # both shards hold channels
        received = [
            await asyncio.wait_for(layer.receive(channel), 5)
            for layer, channel in zip(layers, channels, strict=True)
        ]
        assert [message["n"] for message in received] == list(range(16))
        for layer, channel in zip(layers, channels, strict=True):
            await layer.group_add("voice-key-1", channel)
        await sender.group_send("voice-key-1", {"type": "session.end", "reason": "x"})
        got = [
            await asyncio.wait_for(layer.receive(channel), 5)
            for layer, channel in zip(layers, channels, strict=True)
        ]
        assert [message["reason"] for message in got] == ["x"] * 16
        for layer in layers:
            await layer.flush()
    finally:
        for server in servers:
            server.stop()
