"""A text conversation with an agent on the engine's own session, off any socket: what
tests and simulations drive. No tool runs, of any kind (sandbox, browser, MCP, knowledge,
system): every call answers with the result the test gives it (``{"ok": true}`` by
default) and nothing is dialled; every call is recorded with its arguments."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from engine import protocol
from engine.protocol import ToolStatus
from engine.session import VoiceSession
from engine.session.config import SettledToolCall
from engine.session.usage import usage_from_wire
from engine.tools.call import ToolRequest, ToolResult
from engine.tools.runner import SANDBOX, ToolRunner
from realtime.session_setup import SessionPlan

DEFAULT_TOOL_RESULT: dict[str, Any] = {"ok": True}


@dataclass(frozen=True)
class ToolUse:
    name: str
    arguments: Any


@dataclass
class Reply:
    """What the agent did with one user turn."""

    text: str = ""
    tools: list[ToolUse] = field(default_factory=list)
    error: str = ""  # the session's error code, when the turn failed


class MockedTools(ToolRunner):
    """Answers every tool with the given results instead of running it."""

    def __init__(self, results: dict[str, Any]) -> None:
        self.results = results

    async def run(self, request: ToolRequest) -> ToolResult:
        result = self.results.get(request.name, DEFAULT_TOOL_RESULT)
        return ToolResult(status=ToolStatus.COMPLETED, result=json.dumps(result))


class Conversation:
    """One session in text mode; ``say`` is one user turn and its reply."""

    def __init__(
        self, plan: SessionPlan, *, tool_results: dict[str, Any], turn_timeout_s: float
    ) -> None:
        self.tool_results = tool_results
        self.turn_timeout_s = turn_timeout_s
        self.greeting = ""
        self.usage: dict[str, int] = {}
        self._events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._tools: list[ToolUse] = []
        plan.config.mode = "text"
        # Every tool goes to the one mocked runner, whatever its kind.
        plan.config.tools = [dataclasses.replace(tool, kind=SANDBOX) for tool in plan.config.tools]
        self.session = VoiceSession(
            config=plan.config,
            llm=plan.llm,
            tool_runner=MockedTools(tool_results),
            emit=self._emit,
            send_audio=self._no_audio,
            on_tool_settled=self._settled,
            scrub=plan.scrubber,
        )

    async def _emit(self, stamped: protocol.Stamped) -> None:
        event = stamped.to_wire()  # as a page reads it: what a test's expectations name
        if event.get("type") == "metrics":  # what each turn consumed, for usage and quotas
            for name, value in usage_from_wire(event.get("usage") or {}).items():
                self.usage[name] = self.usage.get(name, 0) + value
        await self._events.put(event)

    async def _no_audio(self, chunk: bytes) -> None:
        return None

    def _settled(self, call: SettledToolCall) -> None:
        self._tools.append(ToolUse(name=call.name, arguments=call.arguments))

    async def start(self) -> None:
        await self.session.start()

    async def say(self, text: str) -> Reply:
        self._tools = []
        await self.session.handle(protocol.TextMessage(text=text))
        reply = Reply()
        async with asyncio.timeout(self.turn_timeout_s):
            while True:
                event = await self._events.get()
                kind = event.get("type")
                if kind == "greeting":
                    self.greeting = str(event.get("text", ""))
                elif kind == "chat":
                    reply.text = str(event.get("text", ""))
                    break
                elif kind == "error":
                    reply.error = str(event.get("code", "error"))
                    break
        reply.tools = list(self._tools)
        return reply

    async def close(self) -> None:
        await self.session.close()
