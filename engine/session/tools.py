"""Tool calls of a turn: arguments checked against the tool's schema, then run by the
``ToolRunner`` of the tool's kind (``engine.tools.kinds``).

A shielded kind's call (the sandbox's) runs in a background task the turn only waits on
through ``asyncio.shield``: an interrupted turn stops waiting, the tool finishes and its
result still replaces the placeholder in history. Any other kind's call (the browser's)
is cancelled with its turn. A result from outside (the page's ``tool_result``) reaches
its runner through ``resolve_tool_result``.

``ToolCalls`` is given only what it needs: the config, the sandbox runner, the usage
meter, and callables to emit events, report errors, spawn tasks and read the clock. The
session owns it; the turn hands it the history to write the calls and results into.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from engine.doors.door import CallControl
from engine.protocol import ErrorCode, ToolStatus, ToolStatusEvent
from engine.providers.base import ToolCall
from engine.session.config import SessionConfig, SettledToolCall, ToolDefinition, ToolTiming
from engine.session.guard import NoGuard, SessionGuard
from engine.session.state import Turn, log_failure
from engine.session.usage import UsageMeter
from engine.tools.call import ToolRequest, ToolResult
from engine.tools.kinds import SessionTools, session_runners
from engine.tools.runner import BROWSER, Emit, ToolRunner
from engine.tools.schema import ArgumentsInvalid, SchemaError, parse_arguments, validate_arguments

# Extra time the runner gets beyond the tool's own timeout before we stop waiting for it.
SERVER_TOOL_GRACE_S = 5.0
_NAME_SHOWN_MAX = 64

__all__ = ["SERVER_TOOL_GRACE_S", "Emit", "Spawn", "ToolCalls"]

Spawn = Callable[..., asyncio.Task[None]]  # (what, function, *args)


@dataclass(eq=False)
class _Waiting:
    """A call of a kind that is not shielded, while its runner waits."""

    runner: ToolRunner
    turn: Turn
    name: str
    message: dict[str, Any]
    arguments: dict[str, Any]


class ToolCalls:
    def __init__(
        self,
        *,
        config: SessionConfig,
        runner: ToolRunner,
        usage: UsageMeter,
        emit: Emit,
        handle_error: Callable[[ErrorCode, str], Coroutine[Any, Any, None]],
        spawn: Spawn,
        clock: Callable[[], float],
        on_settled: Callable[[SettledToolCall], None] | None = None,
        guard: SessionGuard | None = None,
        call: CallControl | None = None,
    ) -> None:
        self.config = config
        self._guard = guard or NoGuard()
        self._tools = {tool.name: tool for tool in config.tools}
        self._runners = session_runners(
            SessionTools(
                sandbox=runner,
                emit=emit,
                knowledge_bases=tuple(config.knowledge_bases),
                call=call,
            )
        )
        self._usage = usage
        self._emit, self._handle_error, self._spawn = emit, handle_error, spawn
        self._clock, self._on_tool_settled = clock, on_settled
        self._waiting: dict[str, _Waiting] = {}
        self.used_call_ids: set[str] = set()
        self._tool_started: dict[str, tuple[Turn, float]] = {}  # call id → (turn, clock)
        self.background: set[asyncio.Task[Any]] = set()  # shielded calls running

    @property
    def specs(self) -> dict[str, ToolDefinition]:
        return self._tools

    @property
    def running_ids(self) -> list[str]:
        """The calls started and not settled yet, in the order they started."""
        return list(self._tool_started)

    def forget(self, turn: Turn) -> None:
        """``turn`` failed: nothing waits for its client calls any more."""
        for call_id in turn.client_calls:
            self._waiting.pop(call_id, None)

    def drop_client_calls(self) -> None:
        """The session closes: every client call stops waiting."""
        for call_id, waiting in self._waiting.items():
            waiting.runner.cancel(call_id)
        self._waiting.clear()

    async def resolve_tool_result(
        self, call_id: str, result: Any = None, error: str | None = None
    ) -> None:
        """The page's ``tool_result`` for a browser call."""
        if error is not None:
            outcome = ToolResult(ToolStatus.FAILED, error=error)
        else:
            outcome = ToolResult(
                ToolStatus.COMPLETED, result=json.dumps(result, ensure_ascii=False)
            )
        waiting = self._waiting.pop(call_id, None)
        if waiting is None or not waiting.runner.resolve(call_id, outcome):
            await self._handle_error(
                ErrorCode.UNKNOWN_TOOL_CALL,
                "no tool call is waiting for this callId (finished or expired)",
            )

    async def run(
        self,
        turn: Turn,
        text: str,
        calls: tuple[ToolCall, ...],
        history: list[dict[str, Any]],
    ) -> None:
        """Run a round's ``calls`` (``text``: what the LLM wrote with them), writing the
        calls and then their results into ``history``."""
        calls = tuple(
            ToolCall(self._unique_call_id(call.id), call.name, call.arguments) for call in calls
        )
        tool_calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
        history.append({"role": "assistant", "content": text or None, "tool_calls": tool_calls})
        turn.round_open = False
        # Results replace these placeholders in place, even after the turn is gone.
        messages = [
            {"role": "tool", "tool_call_id": c.id, "content": _error_content("interrupted")}
            for c in calls
        ]
        history.extend(messages)
        turn.steps.extend(f"Using {c.name}" for c in calls)
        assert turn.metrics is not None
        turn.metrics.tool_calls += len(calls)
        limit = self.config.max_tool_calls_per_step
        async with asyncio.TaskGroup() as group:  # a cancelled turn cancels every call
            for index, (call, message) in enumerate(zip(calls, messages, strict=True)):
                group.create_task(self._run_tool(turn, call, message, over_limit=index >= limit))

    async def prefetch(
        self, turn: Turn, name: str, query: str, history: list[dict[str, Any]]
    ) -> None:
        """Call ``name`` with ``{"query": query}`` as if the LLM had, before it is asked."""
        call = ToolCall(f"prefetch_{turn.id}", name, json.dumps({"query": query}))
        await self.run(turn, "", (call,), history)

    def _unique_call_id(self, call_id: str) -> str:
        # Some models number calls "0", "1"… every round; the browser needs them unique.
        base = call_id or "call"
        unique, n = base, 1
        while unique in self.used_call_ids:
            n += 1
            unique = f"{base}_{n}"
        self.used_call_ids.add(unique)
        return unique

    async def _run_tool(
        self, turn: Turn, call: ToolCall, message: dict[str, Any], *, over_limit: bool = False
    ) -> None:
        name = call.name[:_NAME_SHOWN_MAX]
        await self.tool_status(call.id, name, ToolStatus.STARTED)
        self._tool_started[call.id] = (turn, self._clock())
        request = self._request(call, name, over_limit=over_limit)
        if isinstance(request, ToolRequest):
            quota_refusal = await self._guard.tool_call_quota()
            if quota_refusal is not None:  # the next turn is refused too (the counter is full)
                request = ToolResult(ToolStatus.FAILED, error=quota_refusal)
        if isinstance(request, ToolResult):  # refused before any runner saw it
            return await self._settle(call.id, name, call.arguments, message, request)
        runner = self._runners[request.kind]
        if runner.shielded:
            await self._run_shielded(runner, request, message)
        else:
            await self._run_in_turn(turn, runner, request, message)

    def _request(self, call: ToolCall, name: str, *, over_limit: bool) -> ToolRequest | ToolResult:
        """The call as its runner takes it, or why it fails before running."""
        if over_limit:
            limit = self.config.max_tool_calls_per_step
            error = f"too many tool calls in one step (at most {limit}): call fewer at once"
            return ToolResult(ToolStatus.FAILED, error=error)
        tool = self._tools.get(call.name)
        if tool is None or tool.kind not in self._runners:
            known = ", ".join(self._tools) or "none"
            return ToolResult(
                ToolStatus.FAILED, error=f"unknown tool {name!r}; available tools: {known}"
            )
        try:
            arguments = parse_arguments(call.arguments)
            validate_arguments(tool.parameters, arguments)
        except (ArgumentsInvalid, SchemaError) as exc:
            return ToolResult(ToolStatus.FAILED, error=f"invalid arguments: {exc}")
        except Exception as exc:  # a broken schema fails this tool, not the turn
            error = f"its parameters could not be checked ({type(exc).__name__})"
            return ToolResult(ToolStatus.FAILED, error=error)
        return ToolRequest(
            call_id=call.id,
            session_id=self.config.session_id,
            workspace_id=self.config.workspace_id,
            name=tool.name,
            arguments=arguments,
            timeout_s=self._timeout(tool),
            kind=tool.kind,
            source=tool.source,
            handler=tool.handler or "",
            pinned=tool.pinned,
            reads_secrets=tool.reads_secrets,
        )

    async def _run_shielded(
        self, runner: ToolRunner, request: ToolRequest, message: dict[str, Any]
    ) -> None:
        task = self._spawn("server tool", self._execute, runner, request, message)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        await asyncio.shield(task)  # an interrupted turn stops waiting; the tool goes on

    async def _execute(
        self, runner: ToolRunner, request: ToolRequest, message: dict[str, Any]
    ) -> None:
        try:
            outcome = await asyncio.wait_for(
                runner.run(request), request.timeout_s + SERVER_TOOL_GRACE_S
            )
        except TimeoutError:
            outcome = ToolResult(ToolStatus.TIMED_OUT, error=_timed_out(request.timeout_s))
        except Exception as exc:
            log_failure(self.config.session_id, "a server tool", exc)
            outcome = ToolResult(ToolStatus.FAILED, error="the tool could not be run")
        self._usage.server_tool_calls += 1
        self._usage.tool_cpu_ms += outcome.cpu_ms
        await self._settle(request.call_id, request.name, request.arguments, message, outcome)

    async def _run_in_turn(
        self, turn: Turn, runner: ToolRunner, request: ToolRequest, message: dict[str, Any]
    ) -> None:
        call_id = request.call_id
        self._waiting[call_id] = _Waiting(runner, turn, request.name, message, request.arguments)
        turn.client_calls.add(call_id)
        if request.kind == BROWSER:
            self._usage.client_tool_calls += 1
        else:
            self._usage.server_tool_calls += 1
        # Cancelled (the turn was interrupted), it stays listed: ``cancel_client_calls``
        # settles it as cancelled.
        outcome = await runner.run(request)
        self._waiting.pop(call_id, None)
        turn.client_calls.discard(call_id)
        await self._settle(call_id, request.name, request.arguments, message, outcome)

    async def cancel_client_calls(self, turn: Turn) -> None:
        """The user interrupted ``turn``: its unshielded calls stop waiting, as cancelled."""
        for call_id in sorted(turn.client_calls):
            waiting = self._waiting.pop(call_id, None)
            if waiting is not None:
                waiting.runner.cancel(call_id)
                error = "cancelled: the user interrupted"
                waiting.message["content"] = _error_content(error)
                outcome = ToolResult(ToolStatus.CANCELLED, error=error)
                await self._call_over(call_id, waiting.name, waiting.arguments, outcome)

    def _timeout(self, tool: ToolDefinition) -> float:
        default = (
            self.config.client_tool_timeout if tool.client else self.config.server_tool_timeout
        )
        return tool.timeout_s or default

    async def _settle(
        self,
        call_id: str,
        name: str,
        arguments: Any,
        message: dict[str, Any],
        outcome: ToolResult,
    ) -> None:
        if outcome.status is ToolStatus.COMPLETED:
            content = outcome.result if outcome.result is not None else "null"
        else:
            content = _error_content(outcome.error or outcome.status.replace("_", " "))
        message["content"] = self._within_turn_budget(call_id, content)
        started = self._tool_started.get(call_id)
        if started is not None and outcome.steps:
            started[0].steps.extend(outcome.steps)
        await self._call_over(call_id, name, arguments, outcome)

    def _within_turn_budget(self, call_id: str, content: str) -> str:
        """A turn's tool results together fill at most half of what one LLM request may
        carry (the running turn is always sent whole): past that, a result is cut short."""
        started = self._tool_started.get(call_id)
        if started is None:
            return content
        turn = started[0]
        room = self.config.llm_request_max_bytes // 2 - turn.tool_result_bytes
        size = len(content.encode())
        if size > room:
            content = _cut(content, max(room, 0))
            size = len(content.encode())
        turn.tool_result_bytes += size
        return content

    async def _call_over(
        self, call_id: str, name: str, arguments: Any, outcome: ToolResult
    ) -> None:
        """Time the call for its turn and report it, then announce its final status.

        Reported first: a turn cancelled while the status goes out still leaves its record.
        """
        started = self._tool_started.pop(call_id, None)
        if started is not None:
            turn, at = started
            duration_ms = (self._clock() - at) * 1000
            # A shielded tool may finish after its turn: it is reported, not in those metrics.
            if turn.metrics is not None and not turn.finished:
                turn.metrics.tools.append(ToolTiming(name, outcome.status, duration_ms, at))
            self._report_settled(call_id, name, arguments, outcome, duration_ms)
        await self.tool_status(call_id, name, outcome.status)

    def _report_settled(
        self, call_id: str, name: str, arguments: Any, outcome: ToolResult, duration_ms: float
    ) -> None:
        if self._on_tool_settled is None:
            return
        masked = outcome.masked_arguments is not None
        settled = SettledToolCall(
            call_id=call_id,
            name=name,
            arguments=outcome.masked_arguments if masked else arguments,
            status=outcome.status,
            result=outcome.result,
            error=outcome.error,
            duration_ms=duration_ms,
            log=outcome.log,
            masked=masked,
        )
        try:
            self._on_tool_settled(settled)
        except Exception as exc:
            log_failure(self.config.session_id, "on_tool_settled", exc)

    async def tool_status(self, call_id: str, name: str, status: ToolStatus) -> None:
        await self._emit(ToolStatusEvent(call_id=call_id, name=name, status=status))


def _error_content(error: str) -> str:
    return json.dumps({"error": error}, ensure_ascii=False)


def _cut(content: str, room: int) -> str:
    """A result cut to ``room`` bytes, saying so (only saying so, when there is no room)."""
    note = {"truncated": True, "error": "this turn's tool results fill the request budget"}
    encoded = content.encode()
    budget = room
    while budget > 0:
        preview = encoded[:budget].decode("utf-8", "ignore")
        cut = json.dumps({**note, "preview": preview}, ensure_ascii=False)
        overflow = len(cut.encode()) - room
        if overflow <= 0:
            return cut
        budget -= overflow
    return json.dumps(note)


def _timed_out(seconds: float) -> str:
    return f"timed out after {seconds:g} s"
