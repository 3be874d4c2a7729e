"""A recording's signed URL (``/recordings/<token>``) is a bearer credential for a few
minutes: no log line of the platform carries one (docs/privacy.md, "Recordings").

Two writers would: Django's request logger (``Not Found: /recordings/…``, and a ``416``
answered to a current URL), filtered here by ``RecordingUrlFilter`` on that logger; and
daphne's access log, which it writes itself (not through ``logging``) with the request's
whole URI, so under daphne its ``log_action`` is wrapped to mask the token first.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

_RECORDING_URL = re.compile(r"/recordings/[^\s\"'?#]+(\?[^\s\"'#]*)?")
MASKED = "/recordings/…"


def mask_recording_urls(text: str) -> str:
    return _RECORDING_URL.sub(MASKED, text) if "/recordings/" in text else text


class RecordingUrlFilter(logging.Filter):
    """Masks recording URLs in the records of the logger it is set on."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_recording_urls(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def mask_access_log_in_daphne() -> None:
    """Under daphne (its server module loaded: we are its application), its access log
    names a recording's URL masked."""
    if "daphne.server" not in sys.modules:
        return
    from daphne.server import Server

    if getattr(Server.log_action, "recording_urls_masked", False):
        return
    logged = Server.log_action

    def log_action(self: Server, protocol: str, action: str, details: dict[str, Any]) -> None:
        if isinstance(details.get("path"), str):
            details = {**details, "path": mask_recording_urls(details["path"])}
        logged(self, protocol, action, details)

    log_action.recording_urls_masked = True  # type: ignore[attr-defined]
    Server.log_action = log_action
