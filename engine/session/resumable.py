"""What a session is made of when it moves: a snapshot, and settling before a handover.

The snapshot is plain JSON data (history, variables, the turn and call counters, the
tool calls still running); whoever keeps it serialises it at once, since the session
goes on changing the objects it refers to. ``restore`` puts it into a freshly built
session of another process; ``seq`` is not restored here, because the caller knows
more (the events the old process logged after its snapshot, the client's ``lastSeq``)
and passes the session's next seq as ``first_seq``.

``Relocation`` is owned by the session and given the conversation (history and variables,
restored in place), the ``Turns`` and ``ToolCalls`` collaborators, the event that says
the client can play audio, and a callable for the session's last seq.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from engine.protocol import ToolStatus
from engine.session.tools import ToolCalls
from engine.session.turns import Turns

LOST_CALL_ERROR = "interrupted: the session moved to another server while the tool ran"


class Relocation:
    def __init__(
        self,
        *,
        history: list[dict[str, Any]],
        variables: dict[str, str],
        turns: Turns,
        tool_calls: ToolCalls,
        audio_ready: asyncio.Event,
        last_seq: Callable[[], int],
    ) -> None:
        self._history, self._variables = history, variables
        self._turns, self._tool_calls = turns, tool_calls
        self._audio_ready, self._last_seq = audio_ready, last_seq
        self._lost_calls: list[tuple[str, str]] = []

    def snapshot(self) -> dict[str, Any]:
        """The state a resumed session goes on from (refers to live objects: serialise now)."""
        return {
            "seq": self._last_seq(),
            "history": self._history,
            "variables": self._variables,
            "turnIds": self._turns.ids,
            "usedCallIds": sorted(self._tool_calls.used_call_ids),
            "pendingCalls": self._pending_calls(),
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Take over a snapshot's state (before ``resume``)."""
        self._history[:] = list(snapshot.get("history") or [])
        self._variables.clear()
        self._variables.update(snapshot.get("variables") or {})
        self._turns.ids = int(snapshot.get("turnIds") or 0)
        self._tool_calls.used_call_ids = set(snapshot.get("usedCallIds") or [])
        self._lost_calls = [(c["callId"], c["name"]) for c in snapshot.get("pendingCalls") or []]
        lost = {call_id for call_id, _name in self._lost_calls}
        for message in self._history:
            if message.get("role") == "tool" and message.get("tool_call_id") in lost:
                message["content"] = json.dumps({"error": LOST_CALL_ERROR})
        self._audio_ready.set()  # the client could play audio before it moved

    async def report_lost_calls(self) -> None:
        """Calls that were running when their process went away end as failed for the client."""
        lost, self._lost_calls = self._lost_calls, []
        for call_id, name in lost:
            await self._tool_calls.tool_status(call_id, name, ToolStatus.FAILED)

    async def settle(self, within_s: float) -> None:
        """Before a handover: let the turn and running server tools finish, up to ``within_s``.

        A turn waiting for a client tool is not waited for (its client is reconnecting
        elsewhere); whatever still runs then is interrupted, so history holds what the
        user got.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        while (remaining := deadline - loop.time()) > 0:
            running = {task for task in self._tool_calls.background if not task.done()}
            turn = self._turns.current
            if (
                turn is not None
                and turn.task is not None
                and not turn.task.done()
                and not turn.client_calls
                and not turn.awaiting_audio
            ):
                running.add(turn.task)
            if not running:
                break
            # Re-check now and then: a turn may start waiting for a client tool.
            await asyncio.wait(running, timeout=min(remaining, 0.1))
        async with self._turns.control_lock:
            await self._turns.interrupt("handover", None)

    def _pending_calls(self) -> list[dict[str, str]]:
        running = self._tool_calls.running_ids
        if not running:
            return []
        names = {
            call["id"]: call["function"]["name"]
            for message in self._history
            for call in message.get("tool_calls") or ()
        }
        return [
            {"callId": call_id, "name": names.get(call_id, "")}
            for call_id in running
            if call_id in names
        ]
