"""A URL that carries a credential leaves none in a log line (docs/privacy.md, "Recordings").

Some routes take a bearer token in their path: a recording's signed URL
(``/recordings/<token>``), and the dashboard's one-time links: an email's verification
(``/verify-email/<token>/``), a password reset (``/password-reset/<uid>/<token>/``) and a
workspace invitation (``/invitations/<token>/``). Some sockets take one in their query: a
session token (``/v1/session?token=st_…``), a phone stream's (``/phone/telnyx/stream?token=…``).
So a URL is logged as its path with the token masked, and with no query string at all.

Two writers would log one: Django's request logger (``Not Found: /recordings/…``),
filtered by ``CredentialUrlFilter`` (which also strips a URL passed as a log argument, as
access-log lines pass it); and daphne's access log, which it writes itself (not through
``logging``) with the request's whole URI, so its ``log_action`` is wrapped to mask it first.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

# The segment after one of these is a bearer token (and what follows it, a recording's
# query: ``?download=1``).
_CREDENTIAL_URL = re.compile(
    r"(?P<route>/recordings/|/verify-email/|/invitations/|/password-reset/[^/\s\"'?#]+/)"
    r"[^/\s\"'?#]+(?:\?[^\s\"'#]*)?"
)
_QUERY = re.compile(r"\?[^\s\"'#]*")
MASK = "…"
MASKED = "/recordings/" + MASK  # how a recording's URL reads in a log


def mask_credential_urls(text: str) -> str:
    """``text`` with the token of every credential-carrying path in it masked."""
    return _CREDENTIAL_URL.sub(rf"\g<route>{MASK}", text) if "/" in text else text


def loggable_url(url: str) -> str:
    """A request's path (and query) as a log line may carry it: no query, no token."""
    return mask_credential_urls(_QUERY.sub("", url, count=1))


class CredentialUrlFilter(logging.Filter):
    """Masks credential-carrying URLs in the records of the logger it is set on; a URL
    passed as an argument (access-log lines: ``'… "%s %s HTTP/%s" %d'``) loses its query."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(_loggable_argument(argument) for argument in record.args)
        message = record.getMessage()
        masked = mask_credential_urls(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def _loggable_argument(argument: object) -> object:
    return loggable_url(argument) if isinstance(argument, str) and argument[:1] == "/" else argument


def mask_access_log_in_daphne() -> None:
    """Under daphne (its server module loaded: we are its application), its access log
    names a request's path with no query and no token (its WebSocket lines name the path
    only already)."""
    if "daphne.server" not in sys.modules:
        return
    from daphne.server import Server

    if getattr(Server.log_action, "credential_urls_masked", False):
        return
    logged = Server.log_action

    def log_action(self: Server, protocol: str, action: str, details: dict[str, Any]) -> None:
        if isinstance(details.get("path"), str):
            details = {**details, "path": loggable_url(details["path"])}
        logged(self, protocol, action, details)

    log_action.credential_urls_masked = True  # type: ignore[attr-defined]
    Server.log_action = log_action
