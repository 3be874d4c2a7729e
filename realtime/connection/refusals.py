"""Why a connection is refused or closed: close codes, and the refusals said in words."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from redis.exceptions import RedisError

from core.rates import StorageError
from engine.protocol import CloseCode, ErrorCode
from realtime import access as access_rules
from realtime.session_setup import ConfigureRefused, InlineRefused
from sessions_app.workspace_providers import dashboard_url

# The client stopped (1000, as stop() sends) or its page went away (1001, a closed tab or a
# navigation: nothing there will resume): the session ends at once and frees its place.
CLEAN_CLOSES = frozenset({1000, 1001})
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
    CloseCode.NO_CONFIGURE, ErrorCode.BAD_PROTOCOL, "protocol must be v1 or voiceide"
)
# Said in words, not a 1011 crash: the page can retry, and nothing was half-made.
SERVICE_UNAVAILABLE = Refusal(
    CloseCode.TRY_AGAIN,
    ErrorCode.SERVICE_UNAVAILABLE,
    "the platform cannot start sessions right now; try again in a moment",
)
# This process is shutting down (``realtime.drain``): the browser library tries again,
# and the load balancer, told by /healthz, sends it to another process.
DRAINING = Refusal(
    CloseCode.TRY_AGAIN,
    ErrorCode.SERVICE_UNAVAILABLE,
    "this server is restarting; connect again",
)
RESUME_REFUSED = Refusal(
    CloseCode.RESUME_REFUSED, ErrorCode.RESUME_REFUSED, "the resume token does not match"
)


def configure_timeout() -> Refusal:
    return Refusal(
        CloseCode.NO_CONFIGURE,
        ErrorCode.CONFIGURE_TIMEOUT,
        f"no configure within {settings.CONFIGURE_TIMEOUT_S:g} s",
    )


def refused(error: access_rules.ConnectionRefused | ConfigureRefused) -> Refusal:
    if isinstance(error, InlineRefused):
        return Refusal(error.close_code, error.code, inline_refusal_message(error))
    return Refusal(error.close_code, error.code, error.message)


# The key's switches, as the dashboard's key form labels them.
SWITCH_CONFIG = "Pages may configure the agent themselves"
SWITCH_CODE = "Pages may send server-tool code"


def _what_was_refused(error: InlineRefused) -> list[str]:
    parts = []
    if error.code_tools:
        parts.append(f"server-tool code ({', '.join(error.code_tools)})")
    if error.config_fields:
        parts.append(f"its own agent settings ({', '.join(error.config_fields)})")
    if error.variables:
        parts.append(f"variables ({', '.join(error.variables)})")
    return parts


def inline_refusal_message(error: InlineRefused) -> str:
    """Everything the page was refused, at once, and what would allow it: the key's
    switches and the dashboard page where they are (a token: the agent it was minted for)."""
    key, workspace_id = error.key, error.key.workspace_id
    refused = " and ".join(_what_was_refused(error))
    if error.by_token:
        said = (
            f"A session token serves the saved agent it was minted for only; the page's "
            f"{refused or 'choice of agent'} was refused."
        )
        if error.variables:
            said += (
                " A token session's variables are the token's: set them when minting it, or "
                "name those the page may set in its page_variables (POST /api/v1/session-tokens)."
            )
        if error.code_tools or error.config_fields or error.no_agent:
            said += (
                " Save these settings in the agent on the dashboard's Agents page: "
                f"{dashboard_url('dashboard:agents', workspace_id)}"
            )
        return said
    switches = []
    if error.config_fields or error.no_agent:
        switches.append(f"“{SWITCH_CONFIG}”")
    if error.code_tools:
        switches.append(f"“{SWITCH_CODE}”")
    said = f"This key ({key.display}) refused the page's {refused}"
    if not refused:
        said = f"This key ({key.display}) serves saved agents only, and the page named none"
    return (
        f"{said}. To allow this, turn on {' and '.join(switches)} for this key on the "
        "dashboard's API keys page, or save the agent on the dashboard and connect with "
        f"agent=<slug>. The key's settings: "
        f"{dashboard_url('dashboard:key-edit', workspace_id, key.pk)}"
    )
