"""How many jobs of a workspace are queued or running, capped, and the jobs that wait for
one of its slots: what keeps one shared Celery queue fair between workspaces (webhook
deliveries, knowledge indexing, agent test runs and simulations). One ``WorkspaceSlots``
per kind of job.

A slot is taken when a job is queued (and held from then until the job ends); a job over
the cap is parked instead: kept in a list of its workspace's, never queued (where hundreds
of them would hold up every other workspace's jobs). Giving a slot back hands it on to the
workspace's next parked job, which is queued then, so the queue only ever holds work that
can start. Taking a slot or parking, and giving one back and handing it on, are each one
step: no job is parked just after the last slot was given back with nobody left to unpark
it.

With Redis the slots are members of a sorted set per workspace, scored by when they lapse:
a worker that dies in the middle of a job never gives its slot back, so every slot lapses
on its own after the kind's time to live (longer than any job can take), and a slow sweep
(``sweep``) unparks the jobs of workspaces that have free slots again. On the embedded
default the slots and the parked jobs are kept in this process (its threads always give
their slots back). A parked job is a string (the caller encodes and decodes it).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from core import backends

logger = logging.getLogger(__name__)

# Lapsed slots go, then one more is taken if there is room, else the attempt is parked.
# Redis's own clock: the workers' clocks may disagree.
_TAKE_OR_PARK = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  redis.call('RPUSH', KEYS[2], ARGV[4])
  return 0
end
redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
"""

# Give back a slot (none: ARGV[3] empty) and hand each free slot on to a parked attempt
# (ARGV[5..]: a fresh token for each): the attempts and their tokens, to be queued.
_RELEASE = """
if ARGV[3] ~= '' then redis.call('ZREM', KEYS[1], ARGV[3]) end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
local free = tonumber(ARGV[1]) - redis.call('ZCARD', KEYS[1])
local out = {}
local n = 5
while free > 0 and ARGV[n] do
  local entry = redis.call('LPOP', KEYS[2])
  if not entry then break end
  redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[4]), ARGV[n])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]))
  table.insert(out, entry)
  table.insert(out, ARGV[n])
  free = free - 1
  n = n + 1
end
table.insert(out, redis.call('LLEN', KEYS[2]))
return out
"""

# The attempt that took a slot when it was queued starts: the slot is held from now on, or
# 0 when it lapsed in the meantime (the queue was slow; the attempt takes one anew).
_HOLD = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local lapses = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not lapses or tonumber(lapses) <= now_ms then return 0 end
redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
"""

Start = Callable[[str, str], object]  # queue a parked job (as parked) in a slot (its token)

LOCAL = "local"  # the embedded default's slots are counted, not named


class _Local:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.slots: dict[int, int] = defaultdict(int)
        self.parked: dict[int, deque[str]] = defaultdict(deque)

    def take_or_park(self, workspace_id: int, job: str, cap: int) -> bool:
        with self._lock:
            if self.slots[workspace_id] >= cap:
                self.parked[workspace_id].append(job)
                return False
            self.slots[workspace_id] += 1
            return True

    def release(self, workspace_id: int, cap: int) -> list[str]:
        """Gives a slot back; the parked jobs it (and any other free slot) passes to."""
        with self._lock:
            self.slots[workspace_id] = max(0, self.slots[workspace_id] - 1)
            waiting = self.parked[workspace_id]
            free = cap - self.slots[workspace_id]
            handed = [waiting.popleft() for _ in range(min(free, len(waiting)))]
            self.slots[workspace_id] += len(handed)
            return handed


@dataclass(frozen=True)
class WorkspaceSlots:
    """The slots of one kind of job: Redis keys under ``prefix``, ``cap()`` slots a
    workspace, each lapsing after ``ttl_s()`` seconds."""

    prefix: str
    cap: Callable[[], int]
    ttl_s: Callable[[], float]
    _local: _Local = field(default_factory=_Local, compare=False, repr=False)

    def _keys(self, workspace_id: int) -> list[str]:
        """A workspace's slots and parked jobs: one hash tag, so one script takes both on a
        Redis Cluster. (The sweep's list of workspaces, ``_parked_workspaces``, is kept
        beside them, outside the scripts.)"""
        return [f"{self.prefix}:{{{workspace_id}}}:in-flight",
                f"{self.prefix}:{{{workspace_id}}}:parked"]  # fmt: skip

    @property
    def _parked_workspaces(self) -> str:
        return f"{self.prefix}:parked-workspaces"

    def _ttl_ms(self) -> int:
        return int(self.ttl_s() * 1000)

    def take_or_park(self, workspace_id: int, job: str) -> str | None:
        """A slot of the workspace's (its token, which names the workspace, for ``hold``
        and ``release``), or None: the job is parked until a slot is given back
        (``release`` hands it on then)."""
        if not backends.production():
            taken = self._local.take_or_park(workspace_id, job, self.cap())
            return _token(workspace_id, LOCAL) if taken else None
        token = _token(workspace_id, uuid.uuid4().hex)
        with backends.redis_sync(backends.COUNTERS) as client:
            taken = client.eval(
                _TAKE_OR_PARK, 2, *self._keys(workspace_id), self.cap(), self._ttl_ms(), token,
                job,
            )  # fmt: skip
            if not taken:  # after parking: the sweep's list never misses a parked job
                client.sadd(self._parked_workspaces, workspace_id)
        return token if taken else None

    def hold(self, token: str) -> bool:
        """The job given ``token`` when it was queued starts: True if the slot is still its
        (it lapses if the job waited in the queue longer than ``ttl_s()``)."""
        workspace_id = _workspace_of(token)
        if not backends.production():
            return True
        with backends.redis_sync(backends.COUNTERS) as client:
            key = self._keys(workspace_id)[0]
            return bool(client.eval(_HOLD, 1, key, token, self._ttl_ms()))

    def release(self, token: str) -> list[tuple[str, str]]:
        """Give the slot back; the parked jobs it (and any other free slot) is handed on
        to, each with its slot's token: to be queued."""
        workspace_id = _workspace_of(token)
        if not backends.production():
            handed = self._local.release(workspace_id, self.cap())
            return [(job, _token(workspace_id, LOCAL)) for job in handed]
        return self._redis_hand_on(workspace_id, token)

    def _redis_hand_on(self, workspace_id: int, token: str) -> list[tuple[str, str]]:
        fresh = [_token(workspace_id, uuid.uuid4().hex) for _ in range(self.cap())]
        with backends.redis_sync(backends.COUNTERS) as client:
            *out, still_parked = client.eval(
                _RELEASE, 2, *self._keys(workspace_id), self.cap(), workspace_id, token,
                self._ttl_ms(), *fresh,
            )  # fmt: skip
            if not still_parked:
                # Off the sweep's list, then checked again: a job parked in between (its
                # parker adds the workspace after parking) is put back on it.
                client.srem(self._parked_workspaces, workspace_id)
                if client.llen(self._keys(workspace_id)[1]):
                    client.sadd(self._parked_workspaces, workspace_id)
        return [(_text(out[i]), _text(out[i + 1])) for i in range(0, len(out), 2)]

    def sweep(self) -> list[tuple[str, str]]:
        """The parked jobs of every workspace whose slots lapsed (a worker died holding
        them, or a queued job was lost), each with the slot handed to it: to be queued."""
        if not backends.production():
            return []
        with backends.redis_sync(backends.COUNTERS) as client:
            members = client.smembers(self._parked_workspaces)
        workspaces = [int(member) for member in members]
        return [each for ws in workspaces for each in self._redis_hand_on(ws, "")]

    def run(self, token: str | None, job: Callable[[], object], start: Start) -> None:
        """Run the job queued in slot ``token`` (None: queued without one), then give the
        slot back, however the job ended: ``start`` queues each parked job it is handed
        on to (with its slot's token)."""
        try:
            if token is not None:
                self.hold(token)
            job()
        finally:
            if token is not None:
                for parked, handed in self.release(token):
                    start(parked, handed)

    def sweep_and_start(self, start: Start) -> int:
        """``sweep``, and ``start`` each job it unparks: how many."""
        unparked = self.sweep()
        for parked, handed in unparked:
            start(parked, handed)
        return len(unparked)

    def in_flight(self, workspace_id: int) -> int:
        """Slots taken now (tests, the admin)."""
        if not backends.production():
            return self._local.slots[workspace_id]
        with backends.redis_sync(backends.COUNTERS) as client:
            key = self._keys(workspace_id)[0]
            client.zremrangebyscore(key, "-inf", _redis_now_ms(client))
            return int(client.zcard(key))

    def parked(self, workspace_id: int) -> int:
        """Jobs of the workspace waiting for a slot now (tests, the admin)."""
        if not backends.production():
            return len(self._local.parked[workspace_id])
        with backends.redis_sync(backends.COUNTERS) as client:
            return int(client.llen(self._keys(workspace_id)[1]))


def _token(workspace_id: int, name: str) -> str:
    return f"{workspace_id}:{name}"


def _workspace_of(token: str) -> int:
    return int(token.split(":", 1)[0])


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _redis_now_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def start_sweeper(
    sender: Any, *, queue: str, every_s: Callable[[], float], sweep: Callable[[], int]
) -> None:
    """From ``worker_ready``: a worker that consumes ``queue`` calls ``sweep`` (which queues
    what lapsed slots held parked, and says how many) every ``every_s()`` seconds, on a
    thread of its main process."""
    consumed = getattr(getattr(sender, "app", None), "amqp", None)
    queues = set(consumed.queues.consume_from or {}) if consumed is not None else set()
    if queue in queues:
        args = (queue, every_s, sweep)
        threading.Thread(
            target=_sweep_forever, args=args, name=f"{queue}-sweep", daemon=True
        ).start()
        logger.info("%s sweep: every %s s", queue, every_s())


def _sweep_forever(queue: str, every_s: Callable[[], float], sweep: Callable[[], int]) -> None:
    while True:
        time.sleep(every_s())
        try:
            if unparked := sweep():
                logger.info("%s sweep: %s parked jobs queued again", queue, unparked)
        except Exception as exc:  # Redis away for a moment: the next sweep tries again
            logger.warning("%s sweep failed: %s", queue, type(exc).__name__)
