"""Quotas checked at the instant a turn or a tool call starts: counters, not record writes.

Each quota of a workspace (metric, period) has a counter of what was used in the period,
in the units of ``UsageDaily``'s columns (tokens, ms of audio, calls): in Redis in
production, in this process's memory on the embedded default (one process). A counter is
seeded from the records the first time it is needed in its period (``counters_seed``, at
the handshake, which reads the records anyway); then

- a tool call reserves one call before it starts, in one atomic step (a Lua script: add
  1 only if every tool-call quota has room), so sessions asking at the same instant never
  get more calls than the limit;
- a turn starts only while every quota has room (one read of the counters);
- tokens and audio, known only after a turn, are added when its usage is recorded.

The record writes stay where they were (after the turn, off the event loop); nothing on
a turn's path waits for them. While Redis is unreachable calls and turns are let through
(the records' own check still ends a session after its turn), as the rate limits do.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone
from redis.exceptions import RedisError

from core import backends
from usage_app.quotas import METRICS, Metric, QuotaState, exceeded_message, quota_states

logger = logging.getLogger(__name__)

LIMITS_KEPT_S = 30.0  # a quota an admin changed applies within this
KEY_PREFIX = "voice:quota"
_MISSING = -1

# KEYS: counters; ARGV[1]: the amount to add (0: only check), ARGV[1 + i]: KEYS[i]'s
# limit. Returns 0 (room: added), the 1-based index of a used-up counter, or -1 (a
# counter is not seeded yet). Nothing is added unless every counter has room.
_TAKE = """
for i, key in ipairs(KEYS) do
  local used = redis.call('GET', key)
  if not used then return -1 end
  if tonumber(used) >= tonumber(ARGV[i + 1]) then return i end
end
local amount = tonumber(ARGV[1])
if amount > 0 then
  for _, key in ipairs(KEYS) do redis.call('INCRBY', key, amount) end
end
return 0
"""
# KEYS: counters; ARGV[i]: the amount to add to KEYS[i] if it exists (an absent counter
# is seeded from the records, which hold this usage already).
_ADD = """
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then redis.call('INCRBY', key, tonumber(ARGV[i])) end
end
return 0
"""


@dataclass(frozen=True)
class Counter:
    key: str
    metric: Metric
    limit: int  # in the counter's units
    seed: int  # used in the period when the records were last read
    ttl_s: int


def _counter(workspace_id: int, state: QuotaState) -> Counter:
    metric = state.metric
    ttl = timedelta(days=2 if state.period == "day" else 33)
    return Counter(
        # Hash-tagged by workspace: one script takes several of its counters (one cluster slot).
        key=f"{KEY_PREFIX}:{{{workspace_id}}}:{metric.name}:{state.period}:{state.period_start}",
        metric=metric,
        limit=round(state.limit * metric.scale),
        seed=round(state.used * metric.scale),
        ttl_s=int(ttl.total_seconds()),
    )


def _period_key(now: datetime) -> date:
    return now.date()


# What this process knows of each workspace's quotas: (read at, UTC day, counters).
_known: dict[int, tuple[float, date, list[Counter]]] = {}
_known_lock = threading.Lock()


def counters_seed(*, workspace_id: int, states: list[QuotaState] | None = None) -> None:
    """Read the workspace's quotas (``states``, if the caller has them) and make sure
    each has its counter. On a thread: it reads the records."""
    if states is None:
        states = quota_states(workspace_id=workspace_id)
    counters = [_counter(workspace_id, state) for state in states]
    with _known_lock:
        _known[workspace_id] = (time.monotonic(), _period_key(timezone.now()), counters)
    if counters:
        _store().seed(counters)


def session_start_refusal(*, workspace_id: int) -> str | None:
    """As a session starts: seed the workspace's counters (what its turns and tool calls
    take) and return words for a quota it has used up (None: none is)."""
    states = quota_states(workspace_id=workspace_id)
    counters_seed(workspace_id=workspace_id, states=states)
    return exceeded_message(states)


def _seed_on_own_thread(workspace_id: int) -> None:
    try:
        counters_seed(workspace_id=workspace_id)
    finally:
        connection.close()  # a pool thread's connection would outlive its use


def _counters(workspace_id: int) -> list[Counter] | None:
    """The quotas as last read, or None when they must be read again."""
    with _known_lock:
        known = _known.get(workspace_id)
    if known is None:
        return None
    read_at, day, counters = known
    if time.monotonic() - read_at > LIMITS_KEPT_S or day != _period_key(timezone.now()):
        return None
    return counters


async def _take(workspace_id: int, metrics: Iterable[str], amount: int) -> Counter | None:
    """Add ``amount`` to the counters of ``metrics`` if all have room; the used-up one."""
    wanted = set(metrics)
    for attempt in range(2):
        counters = _counters(workspace_id)
        if counters is None or attempt:
            # Its own thread: never behind the records' writes or other sessions' reads.
            await sync_to_async(_seed_on_own_thread, thread_sensitive=False)(workspace_id)
            counters = _counters(workspace_id) or []
        chosen = [c for c in counters if c.metric.name in wanted]
        if not chosen:
            return None
        found = await _store().take(chosen, amount)
        if found != _MISSING:
            return None if found == 0 else chosen[found - 1]
    return None


def _words(counter: Counter) -> str:
    period = "today (UTC)" if ":day:" in counter.key else "this month (UTC)"
    return (
        f"This workspace has used its quota of {counter.metric.label} {period}. "
        "Conversations can start again when the period ends, or when the platform's "
        "administrators raise the quota."
    )


async def turn_refusal(*, workspace_id: int) -> str | None:
    """None while every quota of the workspace has room, else the words to say."""
    try:
        used_up = await _take(workspace_id, (m.name for m in METRICS), 0)
    except (RedisError, OSError) as exc:
        logger.warning("quota not checked: %s", type(exc).__name__)
        return None
    return None if used_up is None else _words(used_up)


async def tool_call_reserve(*, workspace_id: int) -> str | None:
    """Count one tool call before it starts; the words to say if none is left."""
    try:
        used_up = await _take(workspace_id, ("tool_calls",), 1)
    except (RedisError, OSError) as exc:
        logger.warning("tool-call quota not checked: %s", type(exc).__name__)
        return None
    return None if used_up is None else _words(used_up)


def usage_add(*, workspace_id: int, delta: dict[str, int]) -> None:
    """Recorded usage of the metrics not reserved ahead (tokens, audio); on a thread."""
    counters = _counters(workspace_id) or []
    amounts = [
        (counter, sum(delta.get(column, 0) for column in counter.metric.sums))
        for counter in counters
        if counter.metric.name != "tool_calls"
    ]
    amounts = [(counter, amount) for counter, amount in amounts if amount > 0]
    if not amounts:
        return
    try:
        _store().add(amounts)
    except (RedisError, OSError) as exc:
        logger.warning("quota counters not updated: %s", type(exc).__name__)


# ------------------------------------------------------------------------ the stores


class _MemoryCounters:
    """The embedded default: one process, one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, int] = {}

    def seed(self, counters: list[Counter]) -> None:
        with self._lock:
            for counter in counters:
                self._values.setdefault(counter.key, counter.seed)

    async def take(self, counters: list[Counter], amount: int) -> int:
        with self._lock:
            for index, counter in enumerate(counters, start=1):
                used = self._values.get(counter.key)
                if used is None:
                    return _MISSING
                if used >= counter.limit:
                    return index
            for counter in counters:
                self._values[counter.key] += amount
            return 0

    def add(self, amounts: list[tuple[Counter, int]]) -> None:
        with self._lock:
            for counter, amount in amounts:
                if counter.key in self._values:
                    self._values[counter.key] += amount

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


class _RedisCounters:
    def seed(self, counters: list[Counter]) -> None:
        with backends.redis_sync(backends.COUNTERS) as client:
            pipe = client.pipeline(transaction=False)
            for counter in counters:
                pipe.set(counter.key, counter.seed, nx=True, ex=counter.ttl_s)
            pipe.execute()

    async def take(self, counters: list[Counter], amount: int) -> int:
        keys = [counter.key for counter in counters]
        limits = [counter.limit for counter in counters]
        client = backends.redis_client(backends.COUNTERS)
        result = await client.eval(_TAKE, len(keys), *keys, amount, *limits)
        return int(result)

    def add(self, amounts: list[tuple[Counter, int]]) -> None:
        keys = [counter.key for counter, _ in amounts]
        with backends.redis_sync(backends.COUNTERS) as client:
            client.eval(_ADD, len(keys), *keys, *(amount for _, amount in amounts))


MEMORY_COUNTERS = _MemoryCounters()
REDIS_COUNTERS = _RedisCounters()


def _store() -> _MemoryCounters | _RedisCounters:
    return REDIS_COUNTERS if backends.production() else MEMORY_COUNTERS


def forget_all() -> None:
    """Tests: every process-local memory of quotas goes."""
    with _known_lock:
        _known.clear()
    MEMORY_COUNTERS.clear()
    if backends.production():
        with backends.redis_sync(backends.COUNTERS) as client:
            for key in client.scan_iter(f"{KEY_PREFIX}:*"):
                client.delete(key)
