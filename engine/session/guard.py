"""What a session asks before it starts a turn, sends an LLM request or runs a tool.

The orchestrator knows nothing of Redis or settings: the host injects a ``SessionGuard``
(``realtime.limits``) that counts turns per session and LLM requests per key where
every web process sees them, and the workspace's quotas at the instant a turn or a tool
call starts. ``None`` means go; a string is the refusal, in words.
"""

from __future__ import annotations

from typing import Protocol


class SessionGuard(Protocol):
    async def turn(self) -> str | None: ...

    async def llm_request(self) -> str | None: ...

    async def turn_quota(self) -> str | None: ...

    async def tool_call_quota(self) -> str | None:
        """Counts the call (it is about to start) if the quota has room."""
        ...


class NoGuard:
    """No limits (tests of the orchestrator alone)."""

    async def turn(self) -> str | None:
        return None

    async def llm_request(self) -> str | None:
        return None

    async def turn_quota(self) -> str | None:
        return None

    async def tool_call_quota(self) -> str | None:
        return None
