"""The one registry of tool kinds: how a session builds the ``ToolRunner`` of each.

*A new kind*: its ``ToolRunner`` class (``engine.tools.runner``) and one entry in
``_KINDS``; a ``ToolDefinition`` whose ``kind`` names it is then routed to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.doors.door import CallControl
from engine.tools.browser import BrowserTools, BrowserToolsOnPhone
from engine.tools.runner import BROWSER, SANDBOX, Emit, ToolRunner
from engine.tools.system import SYSTEM, SystemTools

__all__ = [
    "BROWSER",
    "SANDBOX",
    "SYSTEM",
    "SessionTools",
    "kinds",
    "register",
    "session_runners",
    "unregister",
]


@dataclass(frozen=True)
class SessionTools:
    """What a session gives the kinds it builds."""

    sandbox: ToolRunner  # the platform's sandbox runner (``settings.TOOL_RUNNER``)
    emit: Emit
    # The agent's knowledge bases, the only ones the ``knowledge`` kind searches
    # (``knowledge_app.session_tool``, registered from its app).
    knowledge_bases: tuple[int, ...] = ()
    # The phone call the session's door carries (``system`` tools act on it); None: the
    # session is not a call (a browser's), and its browser tools go to the page.
    call: CallControl | None = None


_KINDS: dict[str, Callable[[SessionTools], ToolRunner]] = {
    SANDBOX: lambda tools: tools.sandbox,
    BROWSER: lambda tools: (
        BrowserTools(tools.emit) if tools.call is None else BrowserToolsOnPhone()
    ),
    SYSTEM: lambda tools: SystemTools(tools.call),
}


def kinds() -> list[str]:
    return sorted(_KINDS)


def session_runners(tools: SessionTools) -> dict[str, ToolRunner]:
    """One runner per kind for one session."""
    return {kind: build(tools) for kind, build in _KINDS.items()}


def register(kind: str, build: Callable[[SessionTools], ToolRunner]) -> None:
    """Add a kind from outside this module (tests; a kind an app builds)."""
    _KINDS[kind] = build


def unregister(kind: str) -> None:
    _KINDS.pop(kind, None)
