"""The shared roles on a real Redis Cluster (three masters started here, tests/redis_cluster.py):
``SESSION_STATE_URL`` and ``COUNTERS_URL`` set to ``redis+cluster://…`` as an operator would.

The resume store's keys of one session share a hash tag (its transactions and scripts run in
one slot), sessions spread over the masters; leases, rate limits, quota counters, the
sandbox's fairness slots and the webhooks' slots and parked deliveries keep their limits
exactly as on one Redis.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import redis

from core import backends, leases, rates
from engine.resume.store import Grown
from realtime.resume.store import RedisResumeStore, resume_state_delete_sync
from tests.redis_cluster import redis_cluster
from tools_app import fairness
from usage_app.quota_counters import REDIS_COUNTERS, _counter
from usage_app.quotas import METRICS, QuotaState
from webhooks_app import in_flight


@pytest.fixture(scope="module")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_cluster(Path(tmp_path_factory.mktemp("cluster"))) as url:
        yield url


@pytest.fixture(autouse=True)
def on_cluster(settings: Any, cluster_url: str) -> Iterator[None]:
    """Production (a REDIS_URL), with the two roles on the cluster."""
    settings.REDIS_URL = settings.REDIS_URL or "redis://127.0.0.1:1/0"  # never dialled here
    settings.SESSION_STATE_URL = settings.COUNTERS_URL = cluster_url
    rates.reset()
    yield
    rates.reset()
    with backends.redis_sync_at(cluster_url) as client:
        client.flushall()  # every master


def _keys_per_master(url: str) -> list[int]:
    return [
        int(redis.Redis(host=host, port=port).dbsize())
        for host, port in backends.cluster_nodes(url)
    ]


async def test_the_resume_store_keeps_each_session_in_one_slot_and_spreads_sessions(
    cluster_url: str,
) -> None:
    store = RedisResumeStore()
    ids = [f"session-{n}" for n in range(24)]
    for session_id in ids:
        await store.create(
            session_id, meta=json.dumps({"workspaceId": 1}), state=json.dumps({"seq": 1}),
            ttl=60, grown=Grown(history_kept=None, history=['{"role": "user"}'], call_ids=["c1"]),
        )  # fmt: skip
        await store.write(
            session_id, events=[(2, json.dumps({"type": "turn", "seq": 2}))],
            state=json.dumps({"seq": 2}), ttl=60,
        )  # fmt: skip
    assert all(count > 0 for count in _keys_per_master(cluster_url))  # sharded

    loaded = await store.load("session-7")
    assert loaded is not None and loaded.meta == {"workspaceId": 1}
    assert await store.events_after("session-7", 1) == [{"type": "turn", "seq": 2}]
    await store.keep("session-7", owner="channel-a", owner_ttl=15, ttl=60)
    assert await store.owner("session-7") == "channel-a"
    assert not await store.claim("session-7", owner="b", previous="someone", owner_ttl=15)
    assert await store.claim("session-7", owner="b", previous="channel-a", owner_ttl=15)
    await store.delete("session-7")
    assert await store.load("session-7") is None
    resume_state_delete_sync("session-8")  # from a view, synchronously
    assert await store.load("session-8") is None
    assert await store.load("session-9") is not None


async def test_session_leases_hold_their_limit_on_a_cluster() -> None:
    pools = [leases.workspace_pool(n) for n in range(6)]
    for pool in pools:
        assert await leases.acquire(pool=pool, session_id="a", limit=2)
        assert await leases.acquire(pool=pool, session_id="b", limit=2)
        assert not await leases.acquire(pool=pool, session_id="c", limit=2)
        await leases.release(pool=pool, session_id="a")
        assert await leases.acquire(pool=pool, session_id="c", limit=2)
        assert await leases.holders(pool=pool) == {"b", "c"}
        assert leases.holders_sync(pool=pool) == {"b", "c"}
        await leases.renew(pool=pool, session_id="a")  # released: a renewal adds nothing
        await leases.adopt(pool=pool, session_id="d")  # resumed here: counted again
        assert await leases.holders(pool=pool) == {"b", "c", "d"}


async def test_rate_limits_count_on_a_cluster() -> None:
    rate = rates.Rate("cluster-test", amount=3, per_s=60)
    assert [await rates.hit(rate, "key-1") for _ in range(3)] == [None, None, None]
    wait = await rates.hit(rate, "key-1")
    assert wait is not None and 0 < wait <= 60
    assert await rates.hit(rate, "key-2") is None  # another key counts apart
    assert rates.hit_sync(rate, "key-3") is None
    assert rates.peek_sync(rate, "key-1") is not None


async def test_quota_counters_take_atomically_on_a_cluster() -> None:
    """All of a workspace's counters share its hash tag: one script checks and adds."""
    today = date.today()
    counters = [
        _counter(42, QuotaState(metric=metric, period=period, period_start=today, limit=3, used=0))
        for metric in METRICS
        if metric.name == "tool_calls"
        for period in ("day", "month")
    ]
    REDIS_COUNTERS.seed(counters)
    taken = [await REDIS_COUNTERS.take(counters, 1) for _ in range(4)]
    assert taken == [0, 0, 0, 1]  # the fourth call finds the day's quota used up
    REDIS_COUNTERS.add([(counters[1], 5)])


async def test_sandbox_slots_are_granted_by_notification_on_a_cluster(settings: Any) -> None:
    settings.SANDBOX_QUEUE_SLOTS = 1
    released, holding = asyncio.Event(), asyncio.Event()
    order: list[str] = []

    async def call(workspace_id: int, name: str, hold: asyncio.Event | None = None) -> float:
        async with fairness.workspace_slot(
            workspace_id=workspace_id, member=name, limit=4, hold_s=30, wait_s=10
        ):
            order.append(name)
            granted = time.monotonic()
            if hold is not None:
                holding.set()
                await hold.wait()
            return granted

    first = asyncio.create_task(call(1, "holder", released))
    await asyncio.wait_for(holding.wait(), 10)  # a loaded machine's cluster may be slow
    second = asyncio.create_task(call(2, "waiter"))
    await asyncio.sleep(0.2)
    assert order == ["holder"]
    freed = time.monotonic()
    released.set()
    _, granted = await asyncio.gather(first, second)
    assert order == ["holder", "waiter"]
    assert granted - freed < fairness.RECHECK_S / 2  # told at once, not found by a re-check


def test_webhook_slots_and_parked_deliveries_on_a_cluster(settings: Any) -> None:
    settings.WEBHOOK_WORKSPACE_IN_FLIGHT = 1
    token = in_flight.take_or_park(7, in_flight.Parked(1, 1))
    assert token is not None and in_flight.hold(token)
    assert in_flight.take_or_park(7, in_flight.Parked(2, 1)) is None  # parked
    assert (in_flight.in_flight(7), in_flight.parked(7)) == (1, 1)
    handed = in_flight.release(token)
    assert [parked for parked, _ in handed] == [in_flight.Parked(2, 1)]
    assert in_flight.parked(7) == 0
    assert in_flight.sweep() == []  # nothing left parked anywhere
    in_flight.release(handed[0][1])
    assert in_flight.in_flight(7) == 0
