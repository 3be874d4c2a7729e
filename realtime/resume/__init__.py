"""Resumable sessions: state and events kept outside the process, sessions that outlive
their socket, and handing a session from one web process to another.

``store`` (Redis, or memory in embedded mode), ``host`` (a session's home in this
process), ``handover`` (taking a session over from the process that ran it).
"""

from __future__ import annotations

from engine.resume.store import ResumeStore, StoredSession
from realtime.resume.handover import take_over
from realtime.resume.host import (
    SessionHost,
    Sink,
    handover_wait_s,
    hosts_busy,
    hosts_end_all,
    hosts_live,
    local_host,
    new_channel,
    shielded,
)
from realtime.resume.store import resume_store, token_matches
from secrets_app.crypto import token_digest

__all__ = [
    "ResumeStore",
    "SessionHost",
    "Sink",
    "StoredSession",
    "handover_wait_s",
    "hosts_busy",
    "hosts_end_all",
    "hosts_live",
    "local_host",
    "new_channel",
    "resume_store",
    "shielded",
    "take_over",
    "token_digest",
    "token_matches",
]
