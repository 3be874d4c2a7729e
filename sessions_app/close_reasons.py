"""How a session ended, in words: WebSocket close codes of the platform and of browsers."""

from __future__ import annotations

from engine.protocol import CloseCode
from sessions_app.selectors import NORMAL_CLOSE_CODES

CLOSE_REASONS: dict[int, str] = {
    CloseCode.NORMAL: "Ended",
    CloseCode.GOING_AWAY: "Page closed",
    CloseCode.NO_STATUS: "Ended",
    CloseCode.ABNORMAL: "Connection lost",
    CloseCode.SERVER_ERROR: "Server error",
    CloseCode.NO_CONFIGURE: "No configure sent",
    CloseCode.BAD_KEY: "Invalid key",
    CloseCode.SECRET_KEY: "Secret key refused",
    CloseCode.ORIGIN: "Origin not allowed",
    CloseCode.AGENT: "Agent not allowed",
    CloseCode.INLINE_REFUSED: "Inline config refused",
    CloseCode.TOO_MANY: "Too many sessions",
    CloseCode.ENDED: "Ended by the workspace",
    CloseCode.IDLE: "Idle too long",
    CloseCode.TOO_LONG: "Reached its maximum length",
    CloseCode.RESTART: "Ended by a platform restart",
    CloseCode.QUOTA_EXCEEDED: "Quota exceeded",
}


def close_reason_words(code: int | None) -> str:
    if code is None:
        return CLOSE_REASONS[CloseCode.NORMAL]
    return CLOSE_REASONS.get(code, f"Closed with code {code}")


def ended_normally(code: int | None) -> bool:
    return code is None or code in NORMAL_CLOSE_CODES
