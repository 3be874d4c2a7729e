"""Tool calls of a turn: arguments checked against the tool's schema, then run.

Server tools go to the ``ToolRunner`` in a background task the turn only waits on through
``asyncio.shield``: an interrupted turn stops waiting, the tool finishes and its result
still replaces the placeholder in history. Client tools are sent as ``tool_call`` and
wait on a future that ``resolve_tool_result`` settles, up to the tool's timeout.

``ToolCalls`` is given only what it needs: the config, the runner, the usage meter, and
callables to emit events, report errors, spawn tasks and read the clock. The session
owns it; the turn hands it the history to write the calls and results into.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from sessions_app.orchestrator.config import (
    SessionConfig,
    SettledToolCall,
    ToolDefinition,
    ToolTiming,
)
from sessions_app.orchestrator.state import PendingClientCall, Turn, log_failure
from sessions_app.orchestrator.usage import UsageMeter
from sessions_app.protocol import ErrorCode, ServerEvent, ToolCallEvent, ToolStatusEvent
from sessions_app.providers.base import ToolCall, ToolInvocation, ToolOutcome, ToolRunner
from tools_app.schema import ArgumentsInvalid, SchemaError, parse_arguments, validate_arguments

# Extra time the runner gets beyond the tool's own timeout before we stop waiting for it.
SERVER_TOOL_GRACE_S = 5.0
_NAME_SHOWN_MAX = 64


class Emit(Protocol):
    async def __call__(self, *events: ServerEvent) -> None:
        """Emit ``events`` back to back, in the session's sequence."""


Spawn = Callable[..., asyncio.Task[None]]  # (what, function, *args)


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
    ) -> None:
        self.config = config
        self._tools = {tool.name: tool for tool in config.tools}
        self._tool_runner, self._usage = runner, usage
        self._emit, self._handle_error, self._spawn = emit, handle_error, spawn
        self._clock, self._on_tool_settled = clock, on_settled
        self._client_calls: dict[str, PendingClientCall] = {}
        self.used_call_ids: set[str] = set()
        self._tool_started: dict[str, tuple[Turn, float]] = {}  # call id → (turn, clock)
        self.background: set[asyncio.Task[Any]] = set()  # server tools running

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
            self._client_calls.pop(call_id, None)

    def drop_client_calls(self) -> None:
        """The session closes: every client call stops waiting."""
        for pending in self._client_calls.values():
            pending.future.cancel()
        self._client_calls.clear()

    async def resolve_tool_result(
        self, call_id: str, result: Any = None, error: str | None = None
    ) -> None:
        pending = self._client_calls.pop(call_id, None)
        if pending is None or pending.future.done():
            await self._handle_error(
                ErrorCode.UNKNOWN_TOOL_CALL,
                "no tool call is waiting for this callId (finished or expired)",
            )
            return
        pending.future.set_result((result, error))

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
        await self.tool_status(call.id, name, "started")
        self._tool_started[call.id] = (turn, self._clock())
        if over_limit:
            limit = self.config.max_tool_calls_per_step
            error = f"too many tool calls in one step (at most {limit}): call fewer at once"
            outcome = ToolOutcome("failed", error=error)
            return await self._settle(call.id, name, call.arguments, message, outcome)
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            error = f"unknown tool {name!r}; available tools: {known}"
            outcome = ToolOutcome("failed", error=error)
            return await self._settle(call.id, name, call.arguments, message, outcome)
        try:
            arguments = parse_arguments(call.arguments)
            validate_arguments(tool.parameters, arguments)
        except (ArgumentsInvalid, SchemaError) as exc:
            outcome = ToolOutcome("failed", error=f"invalid arguments: {exc}")
            return await self._settle(call.id, name, call.arguments, message, outcome)
        if tool.client:
            await self._run_client_tool(turn, tool, call, arguments, message)
        else:
            await self._run_server_tool(tool, call, arguments, message)

    async def _run_server_tool(
        self,
        tool: ToolDefinition,
        call: ToolCall,
        arguments: dict[str, Any],
        message: dict[str, Any],
    ) -> None:
        invocation = ToolInvocation(
            call_id=call.id,
            session_id=self.config.session_id,
            workspace_id=self.config.workspace_id,
            name=tool.name,
            handler=tool.handler or "",
            arguments=arguments,
            timeout_s=self._timeout(tool),
            pinned=tool.pinned,
            reads_secrets=tool.reads_secrets,
        )
        task = self._spawn("server tool", self._execute, invocation, message)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        await asyncio.shield(task)  # an interrupted turn stops waiting; the tool goes on

    async def _execute(self, invocation: ToolInvocation, message: dict[str, Any]) -> None:
        try:
            outcome = await asyncio.wait_for(
                self._tool_runner.run(invocation), invocation.timeout_s + SERVER_TOOL_GRACE_S
            )
        except TimeoutError:
            outcome = ToolOutcome("timed_out", error=_timed_out(invocation.timeout_s))
        except Exception as exc:
            log_failure(self.config.session_id, "a server tool", exc)
            outcome = ToolOutcome("failed", error="the tool could not be run")
        self._usage.server_tool_calls += 1
        self._usage.tool_cpu_ms += outcome.cpu_ms
        await self._settle(
            invocation.call_id, invocation.name, invocation.arguments, message, outcome
        )

    async def _run_client_tool(
        self,
        turn: Turn,
        tool: ToolDefinition,
        call: ToolCall,
        arguments: dict[str, Any],
        message: dict[str, Any],
    ) -> None:
        future: asyncio.Future[tuple[Any, str | None]] = asyncio.get_running_loop().create_future()
        self._client_calls[call.id] = PendingClientCall(future, turn, tool.name, message, arguments)
        turn.client_calls.add(call.id)
        timeout = self._timeout(tool)
        self._usage.client_tool_calls += 1
        await self._emit(ToolCallEvent(call_id=call.id, name=tool.name, arguments=arguments))
        try:
            result, error = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._client_calls.pop(call.id, None)
            outcome = ToolOutcome("timed_out", error=_timed_out(timeout))
        else:
            if error is not None:
                outcome = ToolOutcome("failed", error=error)
            else:
                outcome = ToolOutcome("completed", result=json.dumps(result, ensure_ascii=False))
        turn.client_calls.discard(call.id)
        await self._settle(call.id, tool.name, arguments, message, outcome)

    async def cancel_client_calls(self, turn: Turn) -> None:
        """The user interrupted ``turn``: its client calls stop waiting, as cancelled."""
        for call_id in sorted(turn.client_calls):
            pending = self._client_calls.pop(call_id, None)
            if pending is not None:
                pending.future.cancel()
                error = "cancelled: the user interrupted"
                pending.message["content"] = _error_content(error)
                outcome = ToolOutcome("cancelled", error=error)
                await self._call_over(call_id, pending.name, pending.arguments, outcome)

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
        outcome: ToolOutcome,
    ) -> None:
        if outcome.status == "completed":
            content = outcome.result if outcome.result is not None else "null"
        else:
            content = _error_content(outcome.error or outcome.status.replace("_", " "))
        message["content"] = self._within_turn_budget(call_id, content)
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
        self, call_id: str, name: str, arguments: Any, outcome: ToolOutcome
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
        self, call_id: str, name: str, arguments: Any, outcome: ToolOutcome, duration_ms: float
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

    async def tool_status(self, call_id: str, name: str, status: str) -> None:
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
