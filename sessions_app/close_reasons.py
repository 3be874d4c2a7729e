"""How a session ended, in words: WebSocket close codes of the platform and of browsers."""

from __future__ import annotations

from sessions_app import access
from sessions_app.selectors import NORMAL_CLOSE_CODES

CLOSE_REASONS = {
    1000: "Ended",
    1001: "Page closed",
    1005: "Ended",
    1006: "Connection lost",
    1011: "Server error",
    access.CLOSE_NO_CONFIGURE: "No configure sent",
    access.CLOSE_BAD_KEY: "Invalid key",
    access.CLOSE_SECRET_KEY: "Secret key refused",
    access.CLOSE_ORIGIN: "Origin not allowed",
    access.CLOSE_AGENT: "Agent not allowed",
    access.CLOSE_INLINE_REFUSED: "Inline config refused",
    access.CLOSE_TOO_MANY: "Too many sessions",
    access.CLOSE_ENDED: "Ended by the workspace",
    access.CLOSE_IDLE: "Idle too long",
    access.CLOSE_TOO_LONG: "Reached its maximum length",
    access.CLOSE_RESTART: "Ended by a platform restart",
    access.CLOSE_QUOTA_EXCEEDED: "Quota exceeded",
}


def close_reason_words(code: int | None) -> str:
    if code is None:
        return CLOSE_REASONS[1000]
    return CLOSE_REASONS.get(code, f"Closed with code {code}")


def ended_normally(code: int | None) -> bool:
    return code is None or code in NORMAL_CLOSE_CODES
