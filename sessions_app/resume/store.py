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
process) ``MemoryResumeStore`` does the same in memory.

Payloads are JSON text: the store never holds live objects of a session.
"""

from __future__ import annotations

import abc
import hmac
import json
import time
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from platform_site import backends
from secrets_app.crypto import token_digest
from sessions_app import live

EVENTS_KEPT = 1000

# Atomically: take the owner lease if it is free or still held by the owner we asked to
# hand over (a process that answered, or that was killed and never will).
_CLAIM = """
local current = redis.call('GET', KEYS[1])
if current and current ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
"""


def token_matches(token: str, digest: str) -> bool:
    return hmac.compare_digest(token_digest(token).encode(), digest.encode())


@dataclass(frozen=True)
class StoredSession:
    meta: dict[str, Any]
    state: dict[str, Any]  # the whole snapshot: history and call ids put back in


@dataclass(frozen=True)
class Grown:
    """What changed in a snapshot's growing parts since the last write: a turn writes
    its own entries, never the whole history again."""

    history_kept: int | None  # entries of the stored history that stay (None: all)
    history: list[str]  # JSON entries that follow them
    call_ids: list[str]  # call ids to add


def _put_back(
    state: dict[str, Any], history: Sequence[bytes | str], call_ids: Collection[bytes | str]
) -> dict[str, Any]:
    if history:
        state["history"] = [json.loads(entry) for entry in history]
    if call_ids:
        state["usedCallIds"] = sorted(c.decode() if isinstance(c, bytes) else c for c in call_ids)
    return state


class ResumeStore(abc.ABC):
    """What a resumable session keeps outside its process; all methods are cheap."""

    @abc.abstractmethod
    async def create(
        self, session_id: str, *, meta: str, state: str, ttl: float, grown: Grown | None = None
    ) -> None: ...

    @abc.abstractmethod
    async def write(
        self,
        session_id: str,
        *,
        events: list[tuple[int, str]],
        state: str | None,
        ttl: float,
        grown: Grown | None = None,
    ) -> None:
        """Append events (seq, JSON), replace the state and apply ``grown``, in one round
        trip."""

    @abc.abstractmethod
    async def load(self, session_id: str) -> StoredSession | None: ...

    @abc.abstractmethod
    async def events_after(self, session_id: str, last_seq: int) -> list[dict[str, Any]]: ...

    @abc.abstractmethod
    async def keep(
        self, session_id: str, *, owner: str, owner_ttl: float, ttl: float | None
    ) -> None:
        """Renew the owner lease; with ``ttl``, also the state's expiry (a socket is attached)."""

    @abc.abstractmethod
    async def expire(self, session_id: str, ttl: float) -> None: ...

    @abc.abstractmethod
    async def owner(self, session_id: str) -> str | None: ...

    @abc.abstractmethod
    async def claim(
        self, session_id: str, *, owner: str, previous: str | None, owner_ttl: float
    ) -> bool: ...

    @abc.abstractmethod
    async def delete(self, session_id: str) -> None: ...


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


class RedisResumeStore(ResumeStore):
    async def create(
        self, session_id: str, *, meta: str, state: str, ttl: float, grown: Grown | None = None
    ) -> None:
        state_key = _keys(session_id)[0]
        async with live.redis_client().pipeline(transaction=True) as pipe:
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
        state_key, events_key, _, _, _ = _keys(session_id)
        async with live.redis_client().pipeline(transaction=True) as pipe:
            for seq, event in events:
                pipe.xadd(events_key, {"e": event}, id=f"{seq}-0", maxlen=EVENTS_KEPT)
            if state is not None:
                pipe.hset(state_key, "state", state)
            if grown is not None:
                _grow(pipe, session_id, grown)
            # Every write sets the expiry again, so a write racing the end of a session
            # can leave nothing behind for longer than the TTL.
            for key in _expiring(session_id):
                pipe.pexpire(key, _ms(ttl))
            await pipe.execute()

    async def load(self, session_id: str) -> StoredSession | None:
        state_key, _, _, history_key, calls_key = _keys(session_id)
        async with live.redis_client().pipeline(transaction=True) as pipe:
            pipe.hgetall(state_key)
            pipe.lrange(history_key, 0, -1)
            pipe.smembers(calls_key)
            fields, history, call_ids = await pipe.execute()
        if b"meta" not in fields or b"state" not in fields:
            return None
        state = _put_back(json.loads(fields[b"state"]), history, call_ids)
        return StoredSession(json.loads(fields[b"meta"]), state)

    async def events_after(self, session_id: str, last_seq: int) -> list[dict[str, Any]]:
        events_key = _keys(session_id)[1]
        entries = await live.redis_client().xrange(events_key, min=f"{last_seq + 1}-0")
        return [json.loads(fields[b"e"]) for _id, fields in entries or [] if fields]

    async def keep(
        self, session_id: str, *, owner: str, owner_ttl: float, ttl: float | None
    ) -> None:
        owner_key = _keys(session_id)[2]
        async with live.redis_client().pipeline(transaction=False) as pipe:
            pipe.set(owner_key, owner, px=_ms(owner_ttl))
            if ttl is not None:
                for key in _expiring(session_id):
                    pipe.pexpire(key, _ms(ttl))
            await pipe.execute()

    async def expire(self, session_id: str, ttl: float) -> None:
        async with live.redis_client().pipeline(transaction=False) as pipe:
            for key in _expiring(session_id):
                pipe.pexpire(key, _ms(ttl))
            await pipe.execute()

    async def owner(self, session_id: str) -> str | None:
        value = await live.redis_client().get(_keys(session_id)[2])
        return value.decode() if isinstance(value, bytes) else value

    async def claim(
        self, session_id: str, *, owner: str, previous: str | None, owner_ttl: float
    ) -> bool:
        owner_key = _keys(session_id)[2]
        claimed = await live.redis_client().eval(
            _CLAIM, 1, owner_key, previous or "", owner, _ms(owner_ttl)
        )
        return bool(claimed)

    async def delete(self, session_id: str) -> None:
        await live.redis_client().delete(*_keys(session_id))


# ---------------------------------------------------------------- in memory (one process)


@dataclass
class _Entry:
    meta: str
    state: str
    expires_at: float
    events: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=EVENTS_KEPT))
    owner: str | None = None
    owner_expires_at: float = 0.0
    history: list[str] = field(default_factory=list)
    call_ids: set[str] = field(default_factory=set)

    def grow(self, grown: Grown | None) -> None:
        if grown is None:
            return
        if grown.history_kept is not None:
            del self.history[grown.history_kept :]
        self.history.extend(grown.history)
        self.call_ids.update(grown.call_ids)


class MemoryResumeStore(ResumeStore):
    """The same contract in this process's memory (embedded mode, one web process)."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def _live(self, session_id: str) -> _Entry | None:
        entry = self._entries.get(session_id)
        if entry is not None and entry.expires_at <= time.monotonic():
            del self._entries[session_id]
            return None
        return entry

    async def create(
        self, session_id: str, *, meta: str, state: str, ttl: float, grown: Grown | None = None
    ) -> None:
        entry = _Entry(meta, state, time.monotonic() + ttl)
        entry.grow(grown)
        self._entries[session_id] = entry

    async def write(
        self,
        session_id: str,
        *,
        events: list[tuple[int, str]],
        state: str | None,
        ttl: float,
        grown: Grown | None = None,
    ) -> None:
        entry = self._live(session_id)
        if entry is None:
            return
        last = entry.events[-1][0] if entry.events else 0
        entry.events.extend((seq, event) for seq, event in events if seq > last)
        if state is not None:
            entry.state = state
        entry.grow(grown)
        entry.expires_at = time.monotonic() + ttl

    async def load(self, session_id: str) -> StoredSession | None:
        entry = self._live(session_id)
        if entry is None:
            return None
        state = _put_back(json.loads(entry.state), entry.history, entry.call_ids)
        return StoredSession(json.loads(entry.meta), state)

    async def events_after(self, session_id: str, last_seq: int) -> list[dict[str, Any]]:
        entry = self._live(session_id)
        events = entry.events if entry is not None else ()
        return [json.loads(event) for seq, event in events if seq > last_seq]

    async def keep(
        self, session_id: str, *, owner: str, owner_ttl: float, ttl: float | None
    ) -> None:
        entry = self._live(session_id)
        if entry is None:
            return
        entry.owner, entry.owner_expires_at = owner, time.monotonic() + owner_ttl
        if ttl is not None:
            entry.expires_at = time.monotonic() + ttl

    async def expire(self, session_id: str, ttl: float) -> None:
        entry = self._live(session_id)
        if entry is not None:
            entry.expires_at = time.monotonic() + ttl

    async def owner(self, session_id: str) -> str | None:
        entry = self._live(session_id)
        if entry is None or entry.owner_expires_at <= time.monotonic():
            return None
        return entry.owner

    async def claim(
        self, session_id: str, *, owner: str, previous: str | None, owner_ttl: float
    ) -> bool:
        entry = self._live(session_id)
        if entry is None:
            return False
        current = entry.owner if entry.owner_expires_at > time.monotonic() else None
        if current is not None and current != previous:
            return False
        entry.owner, entry.owner_expires_at = owner, time.monotonic() + owner_ttl
        return True

    async def delete(self, session_id: str) -> None:
        self._entries.pop(session_id, None)

    def clear(self) -> None:
        self._entries.clear()


MEMORY_STORE = MemoryResumeStore()
REDIS_STORE = RedisResumeStore()
_memory_store = MEMORY_STORE  # the tests clear it


def resume_store() -> ResumeStore:
    """Redis in production (any web process may resume), else this process's memory."""
    return backends.resume_store()


def resume_state_delete_sync(session_id: str) -> None:
    """Forget a session's resume state from synchronous code (a view ending the session),
    so no process can take it over afterwards."""
    if not backends.production():
        MEMORY_STORE._entries.pop(session_id, None)
        return
    with backends.redis_sync() as client:
        client.delete(*_keys(session_id))
