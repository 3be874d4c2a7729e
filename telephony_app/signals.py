"""A phone call's session record gets the call's length as it closes (``phone_call_ms``):
the engine's session does not know it was on a phone, the telephony app does."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from realtime.records import record_closing
from sessions_app.models import Session
from telephony_app import calls


@receiver(record_closing)
def _phone_minutes(sender: type[Session], session: Session, **kwargs: Any) -> dict[str, int] | None:
    on_line_ms = calls.call_on_line_ms(workspace_id=session.workspace_id, session=session)
    return None if on_line_ms is None else {"phone_call_ms": on_line_ms}
