"""The browser tool kind: the call goes to the page as ``tool_call`` and waits, up to
the tool's timeout, for the page's ``tool_result`` (``resolve``). On a phone call there is
no page: the kind's calls fail at once with words the LLM can pass on."""

from __future__ import annotations

import asyncio

from engine.protocol import ToolCallEvent, ToolStatus
from engine.tools.call import ToolRequest, ToolResult
from engine.tools.runner import BROWSER, Emit, ToolRunner


class BrowserTools(ToolRunner):
    kind = BROWSER
    shielded = False  # an interrupted turn's calls are cancelled: the page may be gone

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._waiting: dict[str, asyncio.Future[ToolResult]] = {}

    async def run(self, request: ToolRequest) -> ToolResult:
        future: asyncio.Future[ToolResult] = asyncio.get_running_loop().create_future()
        self._waiting[request.call_id] = future  # before the event: the page may be quick
        try:
            await self._emit(
                ToolCallEvent(
                    call_id=request.call_id, name=request.name, arguments=request.arguments
                )
            )
            return await asyncio.wait_for(future, request.timeout_s)
        except TimeoutError:
            return ToolResult(
                ToolStatus.TIMED_OUT, error=f"timed out after {request.timeout_s:g} s"
            )
        finally:
            if self._waiting.get(request.call_id) is future:
                del self._waiting[request.call_id]

    def resolve(self, call_id: str, result: ToolResult) -> bool:
        future = self._waiting.pop(call_id, None)
        if future is None or future.done():
            return False
        future.set_result(result)
        return True

    def cancel(self, call_id: str) -> None:
        future = self._waiting.pop(call_id, None)
        if future is not None:
            future.cancel()


BROWSER_TOOL_REFUSED = (
    "this tool runs in a web browser and cannot run during a phone call; "
    "tell the caller you cannot do that on the phone"
)


class BrowserToolsOnPhone(ToolRunner):
    kind = BROWSER
    shielded = False

    async def run(self, request: ToolRequest) -> ToolResult:
        return ToolResult(ToolStatus.FAILED, error=BROWSER_TOOL_REFUSED)
