"""A session's snapshot as the store keeps it: the small state whole, the history and the
call ids as what changed since the last write.

The history only grows, but a few recent entries change in place (a tool's placeholder
replaced by its result, a reply cut where the user interrupted) and ``reset`` empties
it. An entry changes only by having a key set again, so what was written is recognised
without serialising it again: the same dict holding the same values. From the first
entry that differs, the history is written again (in practice the last few entries).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sessions_app.resume.store import Grown


@dataclass(frozen=True)
class SnapshotWrite:
    state: str  # JSON: the snapshot without its history and call ids
    grown: Grown


class _Written:
    """One history entry as it was written: the dict itself and the values it held."""

    __slots__ = ("entry", "values")

    def __init__(self, entry: dict[str, Any]) -> None:
        self.entry = entry
        self.values = list(entry.items())

    def unchanged(self, entry: dict[str, Any]) -> bool:
        return (
            entry is self.entry
            and len(entry) == len(self.values)
            and all(entry.get(key, self) is value for key, value in self.values)
        )


class SnapshotWriter:
    """Turns a session's snapshots into store writes that carry only what changed."""

    def __init__(self) -> None:
        # None: what the store holds is not known here (a session taken over, a write
        # that failed), so the next write replaces it all.
        self._history: list[_Written] | None = None
        self._call_ids: set[str] = set()

    def next(self, snapshot: dict[str, Any]) -> SnapshotWrite:
        """The write for ``snapshot`` (refers to live objects: called in the same step of
        the loop as ``snapshot()``). ASCII JSON: text a client sent with lone surrogates
        is stored escaped rather than failing to encode."""
        history: list[dict[str, Any]] = snapshot.get("history") or []
        call_ids: list[str] = snapshot.get("usedCallIds") or []
        state = {k: v for k, v in snapshot.items() if k not in ("history", "usedCallIds")}
        kept = self._kept(history)
        if self._history is None:
            self._call_ids = set()
        added_ids = [call_id for call_id in call_ids if call_id not in self._call_ids]
        grown = Grown(
            history_kept=None if self._history is not None and kept == len(self._history) else kept,
            history=[json.dumps(entry) for entry in history[kept:]],
            call_ids=added_ids,
        )
        self._history = (self._history or [])[:kept] + [_Written(e) for e in history[kept:]]
        self._call_ids.update(added_ids)
        return SnapshotWrite(json.dumps(state), grown)

    def forget(self) -> None:
        """The last write may not have reached the store: the next one replaces it all."""
        self._history = None

    def _kept(self, history: list[dict[str, Any]]) -> int:
        written = self._history
        if written is None:
            return 0
        kept = 0
        for entry, was in zip(history, written, strict=False):
            if not was.unchanged(entry):
                break
            kept += 1
        return kept
