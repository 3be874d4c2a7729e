"""Sandbox calls through Celery, granted round-robin across workspaces (Redis).

The production queue is shared by all workspaces and served first come first served, so
the order in which calls enter it decides who waits. A session therefore takes a slot
before it queues a call and gives it back when the outcome arrives: at most
``SANDBOX_QUEUE_SLOTS`` calls (the sandbox workers' processes, all together) are queued or
running at once, at most ``SANDBOX_WORKSPACE_CONCURRENCY`` of one workspace, so a queued
call always finds a free process and the queue itself never holds a backlog.

Who gets a freed slot is decided in one Lua script: among the workspaces with waiting
calls, the one with the fewest calls running, then the one served least recently; within
a workspace, first come first served. A call of a workspace with nothing running thus
goes ahead of any flooding workspace's backlog, whatever the calls' length.

No polling: the script tells the waiter on its process's pub/sub channel. A process still
re-checks its waiters every ``RECHECK_S``, all of them in one script run (a lost message,
or a holder that died without releasing: every slot expires after its hold time, and the
re-check hands an expired one on). One run a second per process, not per waiter: with
hundreds of calls waiting behind a busy workspace's cap, a re-check each was most of the
web process's Redis traffic.

The embedded default needs none of this: its pool schedules per workspace itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from core import backends

logger = logging.getLogger(__name__)

# Every key in one hash tag: a grant is one decision across all workspaces, so on a Redis
# Cluster the slots live in one slot (one node), named by ``HELD`` for the cluster client.
PREFIX = "{voice:sandbox}"
HELD = f"{PREFIX}:held"
RECHECK_S = 1.0  # how often a process re-checks its waiters (a lost message, a dead holder)

# ARGV: prefix, op, now, total, per-workspace cap, workspace, member, then op arguments.
# Keys are named inside (a release may grant a slot to any workspace's waiter), all in one
# hash tag; KEYS[1] (the held set) routes the script on a cluster.
_SCRIPT = """
local P, op, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local total, per = tonumber(ARGV[4]), tonumber(ARGV[5])
local ws, member = ARGV[6], ARGV[7]
local HELD, READY, SERVED, TURN = P..':held', P..':ready', P..':served', P..':turn'
local function held_by(w) return P..':held:'..w end
local function queue(w) return P..':queue:'..w end

local function purge()
  for _, entry in ipairs(redis.call('ZRANGEBYSCORE', HELD, '-inf', now)) do
    local w, m = string.match(entry, '^([^|]*)|(.*)$')
    redis.call('ZREM', held_by(w), m)
  end
  redis.call('ZREMRANGEBYSCORE', HELD, '-inf', now)
end

local function take(w, m, hold)
  local ends = now + hold
  redis.call('ZADD', HELD, ends, w..'|'..m)
  redis.call('ZADD', held_by(w), ends, m)
  redis.call('EXPIRE', held_by(w), math.ceil(hold) + 60)
  redis.call('HSET', SERVED, w, redis.call('INCR', TURN))
end

local function grant()
  while redis.call('ZCARD', HELD) < total do
    local best, best_busy = nil, nil
    local ready = redis.call('ZRANGE', READY, 0, -1)  -- least recently served first
    for _, w in ipairs(ready) do
      local busy = redis.call('ZCARD', held_by(w))
      if busy < per and (best == nil or busy < best_busy) then best, best_busy = w, busy end
    end
    if best == nil then return end
    local entry = redis.call('LPOP', queue(best))
    if entry then
      local deadline, hold, channel, m = string.match(entry, '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
      if tonumber(deadline) > now then
        take(best, m, tonumber(hold))
        redis.call('PUBLISH', channel, best..'|'..m)
      end
    end
    if redis.call('LLEN', queue(best)) == 0 then
      redis.call('ZREM', READY, best)
    else
      redis.call('ZADD', READY, redis.call('HGET', SERVED, best) or 0, best)
    end
  end
end

purge()
if op == 'wait' then
  if not redis.call('ZSCORE', held_by(ws), member) then
    local entry = ARGV[8]
    redis.call('RPUSH', queue(ws), entry)
    redis.call('EXPIRE', queue(ws), math.ceil(tonumber(ARGV[9])) + 60)
    redis.call('ZADD', READY, 'NX', redis.call('HGET', SERVED, ws) or 0, ws)
  end
elseif op == 'release' then
  redis.call('ZREM', HELD, ws..'|'..member)
  redis.call('ZREM', held_by(ws), member)
elseif op == 'leave' then
  redis.call('LREM', queue(ws), 0, ARGV[8])
  if redis.call('LLEN', queue(ws)) == 0 then redis.call('ZREM', READY, ws) end
  redis.call('ZREM', HELD, ws..'|'..member)
  redis.call('ZREM', held_by(ws), member)
end
grant()
if op == 'held' then  -- ARGV[8...]: the process's waiters, 'workspace|member' each
  local held = {}
  for i = 8, #ARGV do
    local w, m = string.match(ARGV[i], '^([^|]*)|(.*)$')
    held[i - 7] = redis.call('ZSCORE', held_by(w), m) and 1 or 0
  end
  return held
end
if redis.call('ZSCORE', held_by(ws), member) then return 1 end
return 0
"""


def _client() -> Any:
    return backends.redis_client(backends.COUNTERS)


class NoSlot(Exception):
    """The deadline passed while every slot the call could take was busy."""


_scripts: dict[int, Any] = {}  # the script registered on each client (its SHA1 once)


def _registered() -> Any:
    client = _client()
    script = _scripts.get(id(client))
    if script is None or script.registered_client is not client:
        script = _scripts[id(client)] = client.register_script(_SCRIPT)
    return script


async def _run(op: str, workspace_id: int | str, member: str, *extra: str | float) -> Any:
    return await _registered()(
        keys=[HELD],
        args=[
            PREFIX,
            op,
            time.time(),
            settings.SANDBOX_QUEUE_SLOTS,
            settings.SANDBOX_WORKSPACE_CONCURRENCY,
            workspace_id,
            member,
            *extra,
        ],
    )


async def _script(op: str, workspace_id: int, member: str, *extra: str | float) -> bool:
    return bool(await _run(op, workspace_id, member, *extra))


@dataclass
class _Wakeups:
    """This event loop's subscription: the script publishes ``workspace|member`` here
    when it grants that member a slot."""

    channel: str = field(default_factory=lambda: f"{PREFIX}:wake:{uuid.uuid4().hex}")
    waiting: dict[str, asyncio.Event] = field(default_factory=dict)  # by 'workspace|member'
    listening: asyncio.Task[None] | None = None
    rechecking: asyncio.Task[None] | None = None

    def wait_for(self, key: str) -> asyncio.Event:
        """The event set when ``key`` holds a slot (told, or found by the re-check)."""
        granted = self.waiting[key] = asyncio.Event()
        if self.rechecking is None:
            self.rechecking = asyncio.create_task(self._recheck(), name="sandbox slot re-check")
        return granted

    async def _recheck(self) -> None:
        """While this process has waiters: every ``RECHECK_S``, one script run hands on
        expired slots and says which of them hold one."""
        while True:
            await asyncio.sleep(RECHECK_S)
            if not self.waiting:
                self.rechecking = None
                return
            keys = list(self.waiting)
            try:
                held = await _run("held", "", "", *keys)
            except (RedisError, OSError) as exc:  # the next round tries again
                logger.warning("sandbox slot re-check failed: %s", type(exc).__name__)
                continue
            for key, flag in zip(keys, held, strict=True):
                granted = self.waiting.get(key)
                if flag and granted is not None:
                    granted.set()

    async def start(self) -> None:
        client = _client()
        await client.ping()  # a cluster client learns its slots on its first command
        pubsub = client.pubsub()
        await pubsub.subscribe(self.channel)  # before any wait names this channel
        self.listening = asyncio.create_task(self._listen(pubsub))

    async def _listen(self, pubsub: PubSub) -> None:
        while True:
            try:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
            except (RedisError, OSError) as exc:  # the re-check covers the gap
                logger.warning("sandbox slot wake-ups interrupted: %s", type(exc).__name__)
                await asyncio.sleep(RECHECK_S)
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.reset()
                    await pubsub.subscribe(self.channel)
                continue
            if message is None:
                continue
            data = message.get("data")
            key = data.decode() if isinstance(data, bytes) else str(data)
            event = self.waiting.get(key)
            if event is not None:
                event.set()


_wakeups: dict[asyncio.AbstractEventLoop, _Wakeups] = {}


async def _subscribed() -> _Wakeups:
    loop = asyncio.get_running_loop()
    wakeups = _wakeups.get(loop)
    if wakeups is None:
        wakeups = _wakeups[loop] = _Wakeups()
        try:
            await wakeups.start()
        except BaseException:
            del _wakeups[loop]
            raise
    return wakeups


@contextlib.asynccontextmanager
async def workspace_slot(
    *, workspace_id: int, member: str, limit: int, hold_s: float, wait_s: float
) -> AsyncIterator[None]:
    """Hold a slot for this call for at most ``hold_s`` seconds once granted.

    ``member`` names the call uniquely across sessions (session id and call id); ``limit``
    is the workspace's cap (``SANDBOX_WORKSPACE_CONCURRENCY``, read by the script).
    Raises ``NoSlot`` if none was granted within ``wait_s``. A waiter holds no Redis
    connection of its own: hundreds of them share their process's subscription.
    """
    del limit  # the script reads the same setting, for every workspace it grants to
    wakeups = await _subscribed()
    loop = asyncio.get_running_loop()
    give_up = loop.time() + wait_s
    entry = f"{time.time() + wait_s}|{hold_s}|{wakeups.channel}|{member}"
    key = f"{workspace_id}|{member}"
    granted = wakeups.wait_for(key)
    held = False
    try:
        held = await _script("wait", workspace_id, member, entry, wait_s)
        while not held:
            left = give_up - loop.time()
            if left <= 0:
                raise NoSlot("every tool slot this call could take stayed busy")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await granted.wait()
            # At the deadline, one last look of its own (granted just then, or not).
            held = granted.is_set() or await _script("check", workspace_id, member)
    except BaseException:
        # Gave up or cancelled: leave the queue, and hand on a slot granted meanwhile.
        wakeups.waiting.pop(key, None)
        await asyncio.shield(_script("leave", workspace_id, member, entry))
        raise
    wakeups.waiting.pop(key, None)
    try:
        yield
    finally:
        await asyncio.shield(_script("release", workspace_id, member))
