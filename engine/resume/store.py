"""The contract of the store a resumable session keeps its state and outgoing events in,
between processes, and the store in this process's memory (one process, and the tests).

The Redis store, and the choice between the two, are the realtime app's
(``realtime.resume.store``). Payloads are JSON text: a store never holds live objects of a
session.
"""

from __future__ import annotations

import abc
import json
import time
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

EVENTS_KEPT = 1000


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


def put_back(
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
        state = put_back(json.loads(entry.state), entry.history, entry.call_ids)
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
