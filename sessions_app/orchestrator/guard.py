"""What a session asks before it starts a turn or sends an LLM request.

The orchestrator knows nothing of Redis or settings: the host injects a ``SessionGuard``
(``sessions_app.limits``) that counts turns per session and LLM requests per key where
every web process sees them. ``None`` means go; a string is the refusal, in words.
"""

from __future__ import annotations

from typing import Protocol


class SessionGuard(Protocol):
    async def turn(self) -> str | None: ...

    async def llm_request(self) -> str | None: ...


class NoGuard:
    """No limits (tests of the orchestrator alone)."""

    async def turn(self) -> str | None:
        return None

    async def llm_request(self) -> str | None:
        return None
