"""The ``ToolRunner`` interface each tool kind implements (the registry: ``kinds``).

A kind is one class: it takes a ``ToolRequest`` and gives back a ``ToolResult``. A
result that arrives from outside the call's own task (a sandbox worker's, over the
channel layer; the browser's ``tool_result``) reaches the runner through ``resolve``.

*A new kind* (MCP, knowledge search, a system tool such as end_call): its class in a
module of this package (or of the app that holds what it needs, as the sandbox's is in
``tools_app``), a ``kind`` name, and one entry in ``kinds._KINDS`` saying how a session
builds it; a ``ToolDefinition`` whose ``kind`` names it is then routed to it.
"""

from __future__ import annotations

import abc
from typing import ClassVar, Protocol

from engine.protocol import ServerEvent
from engine.tools.call import ToolRequest, ToolResult

SANDBOX = "sandbox"
BROWSER = "browser"


class Emit(Protocol):
    async def __call__(self, *events: ServerEvent) -> None:
        """Emit ``events`` back to back, in the session's sequence."""


class ToolRunner(abc.ABC):
    """Runs the calls of one tool kind."""

    kind: ClassVar[str] = SANDBOX
    # True: a call runs on when its turn is interrupted, and its result is kept (it may
    # have had effects); False: the interruption cancels it (``cancel``).
    shielded: ClassVar[bool] = True

    @abc.abstractmethod
    async def run(self, request: ToolRequest) -> ToolResult: ...

    def resolve(self, call_id: str, result: ToolResult) -> bool:
        """``result`` for the call ``call_id`` that ``run`` waits on; False when no call
        of this runner waits for it (finished, expired, or never made)."""
        return False

    def cancel(self, call_id: str) -> None:  # noqa: B027 (a default, not an abstract hook)
        """Stop waiting for ``call_id``: its ``run`` raises ``CancelledError``."""
