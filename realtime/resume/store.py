"""Where a resumable session keeps its state and its outgoing events between processes.

Per session, with Redis:

- ``voice:resume:{id}`` (hash): ``meta`` (written once: the token's digest, the workspace,
  the config, the provider names) and ``state`` (the orchestrator's latest snapshot but
  for its two growing parts, which are kept apart and written as deltas, see ``Grown``);
- ``voice:resume:{id}:history`` (list): the conversation history, one JSON entry each;
- ``voice:resume:{id}:calls`` (set): the call ids the session used;
- ``voice:resume:{id}:events`` (stream): every JSON event, entry id ``<seq>-0``, trimmed
  to about ``EVENTS_KEPT`` entries;
- ``voice:resume:{id}:owner`` (string): the channel of the process that runs the session,
  a short lease its owner renews; a killed owner's lease runs out on its own.

The hash, the stream, the list and the set expire together: ``SESSION_RESUME_TTL`` after an unclean
disconnect, and while a socket is attached that plus the owner lease (renewed), so a
killed process's sessions stay resumable for about the same time. Without Redis (one
process) ``engine.resume.store.MemoryResumeStore`` does the same in memory; the contract
both keep is ``engine.resume.store.ResumeStore``.

Payloads are JSON text: the store never holds live objects of a session.

Writes are the store's busiest path (every event of every session), so the writes and owner
renewals of a process's sessions are sent together (``_WriteBatch``): what the sessions wrote
in one step of the event loop goes in one transaction, one round trip, while the previous one
is in flight. Each session's commands stay atomic and in order (a session has one write in
flight at a time), and every caller still hears of its own write's outcome. A Redis Cluster
has no transaction across sessions' hash slots: there each write is its own transaction. A
write of events alone renews only the events' expiry; one with state renews all four keys.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Callable
from typing import Any

from redis.asyncio.cluster import RedisCluster

from core import backends
from engine.resume.store import (
    EVENTS_KEPT,
    Grown,
    MemoryResumeStore,
    ResumeStore,
    StoredSession,
    put_back,
)
from secrets_app.crypto import token_digest

# Atomically: take the owner lease if it is free or still held by the owner we asked to
# hand over (a process that answered, or that was killed and never will).
_CLAIM = """
local current = redis.call('GET', KEYS[1])
if current and current ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
"""


# A session's state, history and call ids in one atomic read (a script: redis-py's cluster
# client cannot read them in a transaction).
_LOAD = """
return {redis.call('HGETALL', KEYS[1]), redis.call('LRANGE', KEYS[2], 0, -1),
        redis.call('SMEMBERS', KEYS[3])}
"""


def token_matches(token: str, digest: str) -> bool:
    return hmac.compare_digest(token_digest(token).encode(), digest.encode())


# ---------------------------------------------------------------- Redis


def _keys(session_id: str) -> tuple[str, str, str, str, str]:
    """The state, events, owner, history and call-id keys of a session."""
    base = f"voice:resume:{{{session_id}}}"  # one hash slot per session on a cluster
    return base, f"{base}:events", f"{base}:owner", f"{base}:history", f"{base}:calls"


def _expiring(session_id: str) -> tuple[str, ...]:
    state_key, events_key, _, history_key, calls_key = _keys(session_id)
    return state_key, events_key, history_key, calls_key


def _grow(pipe: Any, session_id: str, grown: Grown) -> None:
    _, _, _, history_key, calls_key = _keys(session_id)
    if grown.history_kept == 0:
        pipe.delete(history_key)
    elif grown.history_kept is not None:
        pipe.ltrim(history_key, 0, grown.history_kept - 1)
    if grown.history:
        pipe.rpush(history_key, *grown.history)
    if grown.call_ids:
        pipe.sadd(calls_key, *grown.call_ids)


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _queue_write(
    pipe: Any,
    session_id: str,
    events: list[tuple[int, str]],
    state: str | None,
    grown: Grown | None,
    ttl: float,
) -> None:
    state_key, events_key, _, _, _ = _keys(session_id)
    for seq, event in events:
        pipe.xadd(events_key, {"e": event}, id=f"{seq}-0", maxlen=EVENTS_KEPT)
    if state is not None:
        pipe.hset(state_key, "state", state)
    if grown is not None:
        _grow(pipe, session_id, grown)
    # Every write sets the expiry again of the keys it wrote, so a write racing the end of a
    # session can leave nothing behind for longer than the TTL. Events alone (a pong, a
    # partial transcript) touch only the stream; the others keep the expiry they were given
    # with the last state (or by ``keep``, every few seconds while a socket is attached).
    touched = _expiring(session_id) if state is not None or grown is not None else [events_key]
    for key in touched:
        pipe.pexpire(key, _ms(ttl))


Queued = Callable[[Any], None]  # queues one session's write on a pipeline


class _WriteBatch:
    """The resume writes of one event loop's sessions, sent one transaction at a time:
    everything queued while the previous transaction was in flight (or in the same step of
    the loop) goes in the next."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._queued: list[tuple[Queued, asyncio.Future[None]]] = []
        self._sending: asyncio.Task[None] | None = None

    async def write(self, queue: Queued) -> None:
        future = asyncio.get_running_loop().create_future()
        self._queued.append((queue, future))
        if self._sending is None:
            self._sending = asyncio.create_task(self._send_all(), name="resume store writes")
        await future

    async def _send_all(self) -> None:
        try:
            while self._queued:
                batch, self._queued = self._queued, []
                await self._send(batch)
        finally:
            self._sending = None

    async def _send(self, batch: list[tuple[Queued, asyncio.Future[None]]]) -> None:
        spans = []
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                for queue, _future in batch:
                    start = len(pipe.command_stack)
                    queue(pipe)
                    spans.append((start, len(pipe.command_stack)))
                results = await pipe.execute(raise_on_error=False)
        except Exception as exc:  # the connection, or a command Redis refused to queue
            for _queue, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_queue, future), (start, end) in zip(batch, spans, strict=True):
            error = next((r for r in results[start:end] if isinstance(r, Exception)), None)
            if future.done():  # its writer was cancelled (the write went out all the same)
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(None)


async def _send(queue: Queued) -> None:
    """One session's commands, atomic: with the other sessions' of this step of the loop,
    or on a cluster (no transaction across hash slots) in a transaction of their own."""
    client = backends.redis_client()
    batch = _write_batch(client)
    if batch is None:
        async with client.pipeline(transaction=True) as pipe:
            queue(pipe)
            await pipe.execute()
        return
    await batch.write(queue)


# None for a cluster client. Looked up once a client: ``isinstance`` against redis-py's
# classes (typing protocols underneath) costs a microsecond or more, on every write.
_batches: dict[tuple[asyncio.AbstractEventLoop, int], _WriteBatch | None] = {}


def _write_batch(client: Any) -> _WriteBatch | None:
    key = (asyncio.get_running_loop(), id(client))
    if key not in _batches:
        _batches[key] = None if isinstance(client, RedisCluster) else _WriteBatch(client)
    return _batches[key]


class RedisResumeStore(ResumeStore):
    async def create(
        self, session_id: str, *, meta: str, state: str, ttl: float, grown: Grown | None = None
    ) -> None:
        state_key = _keys(session_id)[0]
        async with backends.redis_client().pipeline(transaction=True) as pipe:
            pipe.delete(*_expiring(session_id))
            pipe.hset(state_key, mapping={"meta": meta, "state": state})
            if grown is not None:
                _grow(pipe, session_id, grown)
            for key in _expiring(session_id):
                pipe.pexpire(key, _ms(ttl))
            await pipe.execute()

    async def write(
        self,
        session_id: str,
        *,
        events: list[tuple[int, str]],
        state: str | None,
        ttl: float,
        grown: Grown | None = None,
    ) -> None:
        def queue(pipe: Any) -> None:
            _queue_write(pipe, session_id, events, state, grown, ttl)

        await _send(queue)

    async def load(self, session_id: str) -> StoredSession | None:
        state_key, _, _, history_key, calls_key = _keys(session_id)
        pairs, history, call_ids = await backends.redis_client().eval(
            _LOAD, 3, state_key, history_key, calls_key
        )
        fields = dict(zip(pairs[::2], pairs[1::2], strict=True))
        if b"meta" not in fields or b"state" not in fields:
            return None
        state = put_back(json.loads(fields[b"state"]), history, call_ids)
        return StoredSession(json.loads(fields[b"meta"]), state)

    async def events_after(self, session_id: str, last_seq: int) -> list[dict[str, Any]]:
        events_key = _keys(session_id)[1]
        entries = await backends.redis_client().xrange(events_key, min=f"{last_seq + 1}-0")
        return [json.loads(fields[b"e"]) for _id, fields in entries or [] if fields]

    async def keep(
        self, session_id: str, *, owner: str, owner_ttl: float, ttl: float | None
    ) -> None:
        owner_key = _keys(session_id)[2]

        def queue(pipe: Any) -> None:
            pipe.set(owner_key, owner, px=_ms(owner_ttl))
            if ttl is not None:
                for key in _expiring(session_id):
                    pipe.pexpire(key, _ms(ttl))

        await _send(queue)

    async def expire(self, session_id: str, ttl: float) -> None:
        async with backends.redis_client().pipeline(transaction=False) as pipe:
            for key in _expiring(session_id):
                pipe.pexpire(key, _ms(ttl))
            await pipe.execute()

    async def owner(self, session_id: str) -> str | None:
        value = await backends.redis_client().get(_keys(session_id)[2])
        return value.decode() if isinstance(value, bytes) else value

    async def claim(
        self, session_id: str, *, owner: str, previous: str | None, owner_ttl: float
    ) -> bool:
        owner_key = _keys(session_id)[2]
        claimed = await backends.redis_client().eval(
            _CLAIM, 1, owner_key, previous or "", owner, _ms(owner_ttl)
        )
        return bool(claimed)

    async def delete(self, session_id: str) -> None:
        await backends.redis_client().delete(*_keys(session_id))


MEMORY_STORE = MemoryResumeStore()
REDIS_STORE = RedisResumeStore()
_memory_store = MEMORY_STORE  # the tests clear it


def resume_store() -> ResumeStore:
    """Redis in production (any web process may resume), else this process's memory."""
    return REDIS_STORE if backends.production() else MEMORY_STORE


def resume_state_delete_sync(session_id: str) -> None:
    """Forget a session's resume state from synchronous code (a view ending the session),
    so no process can take it over afterwards."""
    if not backends.production():
        MEMORY_STORE._entries.pop(session_id, None)
        return
    with backends.redis_sync() as client:
        client.delete(*_keys(session_id))
