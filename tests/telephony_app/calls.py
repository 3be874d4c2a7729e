"""The platform's record of a call, read by a test once the call has ended."""

from __future__ import annotations

from typing import Any

from telephony_app.models import PhoneCall
from tests.sessions_app.recording import eventually


async def ended_call(**lookup: Any) -> PhoneCall:
    """The call matching ``lookup`` once its end is written: the door writes it after the
    stream closes, off the event loop, so on a busy machine a little after the test's
    socket has gone."""
    calls = PhoneCall.objects.filter(ended_at__isnull=False, **lookup)
    found: PhoneCall = await eventually(calls.first)
    return found
