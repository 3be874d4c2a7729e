"""Why a connection is refused or closed: close codes, and the refusals said in words."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from redis.exceptions import RedisError

from platform_site.rates import StorageError
from sessions_app import access as access_rules
from sessions_app.protocol import ErrorCode
from sessions_app.session_setup import ConfigureRefused

# The client stopped (1000, as stop() sends) or its page went away (1001, a closed tab or a
# navigation: nothing there will resume): the session ends at once and frees its place.
CLEAN_CLOSES = frozenset({1000, 1001})
# A service the session needs (Redis) is down: try again later. (1013 would say so, but
# daphne may only send 1000 or 3000-4999.)
CLOSE_TRY_AGAIN = 4503
CLOSE_RESUME_REFUSED = 4001  # a resume with the wrong token, like a wrong key
CLOSE_DISPLACED = 1001  # another connection resumed this session
# Redis (or the rate limits' storage on it) is unreachable.
UNAVAILABLE = (RedisError, StorageError)


@dataclass(frozen=True)
class Refusal:
    """An ``error`` event (``code``, ``message``), then the socket closes with ``close_code``
    (None: it stays open, the client may correct what it sent)."""

    close_code: int | None
    code: ErrorCode
    message: str


BAD_PROTOCOL = Refusal(
    access_rules.CLOSE_NO_CONFIGURE, ErrorCode.BAD_PROTOCOL, "protocol must be v1 or voiceide"
)
# Said in words, not a 1011 crash: the page can retry, and nothing was half-made.
SERVICE_UNAVAILABLE = Refusal(
    CLOSE_TRY_AGAIN,
    ErrorCode.SERVICE_UNAVAILABLE,
    "the platform cannot start sessions right now; try again in a moment",
)
RESUME_REFUSED = Refusal(
    CLOSE_RESUME_REFUSED, ErrorCode.RESUME_REFUSED, "the resume token does not match"
)


def configure_timeout() -> Refusal:
    return Refusal(
        access_rules.CLOSE_NO_CONFIGURE,
        ErrorCode.CONFIGURE_TIMEOUT,
        f"no configure within {settings.CONFIGURE_TIMEOUT_S:g} s",
    )


def refused(error: access_rules.ConnectionRefused | ConfigureRefused) -> Refusal:
    return Refusal(error.close_code, error.code, error.message)
