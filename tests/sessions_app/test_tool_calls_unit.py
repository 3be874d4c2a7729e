"""ToolCalls on its own: given a config, a runner, a usage meter and plain callables, as
the session gives it, without a session around it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any

from engine.protocol import ErrorCode, ServerEvent
from engine.providers.base import ToolCall
from engine.session import SessionConfig, ToolDefinition, TurnMetrics
from engine.session.state import Turn
from engine.session.tools import ToolCalls
from engine.session.usage import UsageMeter
from tests.engine.providers.fake import FakeToolRunner

WEATHER = ToolDefinition(
    name="get_weather",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
    handler="async (args) => ({temp: 21})",
)


class Parts:
    """What a session would hand ToolCalls, recorded."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.errors: list[tuple[ErrorCode, str]] = []
        self.runner = FakeToolRunner(handlers={"get_weather": lambda args: {"temp": 21}})
        self.usage = UsageMeter(tts_sample_rate=16000)
        self.tools = ToolCalls(
            config=SessionConfig(
                session_id="s", resume_token="r", workspace_id=1, llm_name="x", tools=[WEATHER]
            ),
            runner=self.runner,
            usage=self.usage,
            emit=self.emit,
            handle_error=self.handle_error,
            spawn=self.spawn,
            clock=lambda: 0.0,
        )

    async def emit(self, *events: ServerEvent) -> None:
        self.events.extend(event.to_wire(seq=0, ts=0) for event in events)

    async def handle_error(self, code: ErrorCode, message: str) -> None:
        self.errors.append((code, message))

    def spawn(self, what: str, function: Any, *args: Any) -> asyncio.Task[None]:
        coroutine: Coroutine[Any, Any, None] = function(*args)
        return asyncio.create_task(coroutine)

    def statuses(self) -> list[tuple[str, str]]:
        return [(e["callId"], e["status"]) for e in self.events if e["type"] == "tool_status"]


def new_turn() -> Turn:
    return Turn(id=1, metrics=TurnMetrics(1, "text", 0.0))


async def test_a_round_of_calls_writes_calls_then_results_into_the_history() -> None:
    parts = Parts()
    history: list[dict[str, Any]] = []
    calls = (
        ToolCall("0", "get_weather", json.dumps({"city": "Paris"})),
        ToolCall("0", "get_weather", json.dumps({"town": "Lyon"})),  # invalid arguments
        ToolCall("1", "launch", "{}"),  # unknown tool
    )
    await parts.tools.run(new_turn(), "Let me look.", calls, history)
    assistant, *results = history
    assert [c["id"] for c in assistant["tool_calls"]] == ["0", "0_2", "1"]  # made unique
    assert assistant["content"] == "Let me look."
    assert json.loads(results[0]["content"]) == {"temp": 21}
    assert "invalid arguments" in json.loads(results[1]["content"])["error"]
    assert "unknown tool 'launch'" in json.loads(results[2]["content"])["error"]
    finals = {call_id: status for call_id, status in parts.statuses() if status != "started"}
    assert finals == {"0": "completed", "0_2": "failed", "1": "failed"}
    assert parts.usage.server_tool_calls == 1
    assert parts.tools.running_ids == []


async def test_a_result_for_no_waiting_call_is_an_error() -> None:
    parts = Parts()
    await parts.tools.resolve_tool_result("nobody", {"ok": True})
    assert [code for code, _ in parts.errors] == [ErrorCode.UNKNOWN_TOOL_CALL]
