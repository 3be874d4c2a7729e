"""A session's snapshot as the store keeps it: the small state whole, the history and the
call ids as what changed since the last write.

The history only grows, but a few recent entries change in place (a tool's placeholder
replaced by its result, a reply cut where the user interrupted: always by setting its
``content`` again) and ``reset`` empties it. So what was written is recognised without
serialising it again: the same dicts, holding the same contents (compared as lists, at C
speed). From the first entry that differs, the history is written again (in practice the
last few entries).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.resume.store import Grown


@dataclass(frozen=True)
class SnapshotWrite:
    state: str  # JSON: the snapshot without its history and call ids
    grown: Grown


class SnapshotWriter:
    """Turns a session's snapshots into store writes that carry only what changed."""

    def __init__(self) -> None:
        # None: what the store holds is not known here (a session taken over, a write
        # that failed), so the next write replaces it all.
        self._entries: list[dict[str, Any]] | None = None  # as written; kept alive, so
        self._ids: list[int] = []  # their ids stay theirs
        self._contents: list[Any] = []
        self._call_ids: set[str] = set()

    def next(self, snapshot: dict[str, Any]) -> SnapshotWrite:
        """The write for ``snapshot`` (refers to live objects: called in the same step of
        the loop as ``snapshot()``). ASCII JSON: text a client sent with lone surrogates
        is stored escaped rather than failing to encode."""
        history: list[dict[str, Any]] = snapshot.get("history") or []
        state = {k: v for k, v in snapshot.items() if k not in ("history", "usedCallIds")}
        ids = [id(entry) for entry in history]
        contents = [entry.get("content") for entry in history]
        written = self._entries
        kept = 0 if written is None else self._kept(ids, contents)
        if written is None:
            self._call_ids = set()
        added_ids = set(snapshot.get("usedCallIds") or ()) - self._call_ids
        grown = Grown(
            history_kept=None if written is not None and kept == len(written) else kept,
            history=[json.dumps(entry) for entry in history[kept:]],
            call_ids=sorted(added_ids),
        )
        self._entries, self._ids, self._contents = list(history), ids, contents
        self._call_ids |= added_ids
        return SnapshotWrite(json.dumps(state), grown)

    def forget(self) -> None:
        """The last write may not have reached the store: the next one replaces it all."""
        self._entries = None

    def _kept(self, ids: list[int], contents: list[Any]) -> int:
        """How many entries, from the first, the store holds as they are now."""
        n = min(len(ids), len(self._ids))
        if ids[:n] == self._ids[:n] and contents[:n] == self._contents[:n]:
            return n
        return next(
            i for i in range(n) if ids[i] != self._ids[i] or contents[i] != self._contents[i]
        )
