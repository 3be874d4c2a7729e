"""The resume store's writes, sent together for all the sessions of a process (real Redis).

What the sessions write in one step of the event loop goes to Redis in one transaction;
each session's events are still kept once and in order, a write that Redis refuses fails
only its own session, and the expiry every key is given is still the resume TTL.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from redis.exceptions import ResponseError

from core import backends
from engine.resume.store import Grown
from realtime.resume.store import RedisResumeStore

pytestmark = pytest.mark.redis

SESSIONS = 40


def _sid(n: int) -> str:
    return f"{n:032x}"


def _event(seq: int) -> tuple[int, str]:
    return seq, json.dumps({"type": "pong", "seq": seq})


@pytest.fixture
async def store():
    client = backends.redis_client()
    for key in await client.keys("voice:resume:*"):
        await client.delete(key)
    yield RedisResumeStore()
    for key in await client.keys("voice:resume:*"):
        await client.delete(key)


@pytest.fixture
async def round_trips(monkeypatch):
    """How many pipelines the store sent (the client's own, counted as they are made)."""
    client = backends.redis_client()
    made = []
    pipeline = client.pipeline

    def counted(*args, **kwargs):
        made.append(kwargs.get("transaction", True))
        return pipeline(*args, **kwargs)

    monkeypatch.setattr(client, "pipeline", counted)
    return made


async def test_the_writes_of_many_sessions_in_one_step_go_in_one_round_trip(store, round_trips):
    for n in range(SESSIONS):
        await store.create(_sid(n), meta="{}", state="{}", ttl=30)
    round_trips.clear()

    await asyncio.gather(
        *(store.write(_sid(n), events=[_event(1)], state=None, ttl=30) for n in range(SESSIONS))
    )

    assert len(round_trips) == 1  # one transaction for forty sessions
    for n in range(SESSIONS):
        assert [e["seq"] for e in await store.events_after(_sid(n), 0)] == [1]


async def test_every_event_is_kept_once_and_in_order_while_writes_overlap(store, round_trips):
    async def session(n: int) -> None:
        await store.create(_sid(n), meta="{}", state="{}", ttl=30)
        for i, seq in enumerate(range(1, 31, 3)):  # three events a write, as a host does
            await store.write(
                _sid(n), events=[_event(seq), _event(seq + 1), _event(seq + 2)],
                state=json.dumps({"seq": seq + 2}) if i % 2 else None, ttl=30,
            )  # fmt: skip
            if n % 3 == 0:
                await asyncio.sleep(0)  # sessions out of step with each other

    await asyncio.gather(*(session(n) for n in range(SESSIONS)))

    # Fewer round trips than writes: writes queued while one was in flight went together.
    assert len(round_trips) < SESSIONS * 10 / 4
    for n in range(SESSIONS):
        kept = [e["seq"] for e in await store.events_after(_sid(n), 0)]
        assert kept == list(range(1, 31))
        loaded = await store.load(_sid(n))
        assert loaded is not None and loaded.state == {"seq": 30}


async def test_a_write_redis_refuses_fails_its_session_only(store):
    good, bad = _sid(1), _sid(2)
    for sid in (good, bad):
        await store.create(sid, meta="{}", state="{}", ttl=30)
    await store.write(bad, events=[_event(5)], state=None, ttl=30)

    results = await asyncio.gather(
        store.write(good, events=[_event(1)], state=None, ttl=30),
        store.write(bad, events=[_event(5)], state=None, ttl=30),  # seq 5 again: refused
        return_exceptions=True,
    )

    assert results[0] is None
    assert isinstance(results[1], ResponseError)
    assert [e["seq"] for e in await store.events_after(good, 0)] == [1]
    assert [e["seq"] for e in await store.events_after(bad, 0)] == [5]


async def test_events_renew_their_own_expiry_and_a_state_write_renews_every_key(store):
    sid = _sid(3)
    client = backends.redis_client()
    history = Grown(history_kept=None, history=['{"role": "user"}'], call_ids=["c1"])
    await store.create(sid, meta="{}", state="{}", ttl=30, grown=history)
    state_key, events_key = f"voice:resume:{{{sid}}}", f"voice:resume:{{{sid}}}:events"

    await store.write(sid, events=[_event(1)], state=None, ttl=100)
    assert 30_000 < await client.pttl(events_key) <= 100_000
    assert await client.pttl(state_key) <= 30_000  # untouched: the expiry it had

    await store.write(sid, events=[_event(2)], state='{"seq": 2}', ttl=5)
    for suffix in ("", ":events", ":history", ":calls"):
        assert 0 < await client.pttl(f"voice:resume:{{{sid}}}{suffix}") <= 5_000
