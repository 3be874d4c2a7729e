"""Twilio's REST API: create a call, change a live one (new TwiML, or hang it up)."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlencode

from django.conf import settings

from telephony_app.carrier_rest import CarrierError, carrier_request


def _post(
    account_sid: str, auth_token: str, path: str, form: list[tuple[str, str]], expect: int
) -> dict[str, Any]:
    basic = base64.b64encode(f"{account_sid}:{auth_token}".encode()).decode()
    return carrier_request(
        carrier="Twilio",
        url=f"{settings.TWILIO_API_URL}/2010-04-01/Accounts/{account_sid}/{path}",
        headers={
            "Authorization": f"Basic {basic}",
            "Content-Type": "application/x-www-form-urlencoded",
        },
        body=urlencode(form),
        expect=expect,
    )


def call_create(
    *, account_sid: str, auth_token: str, form: list[tuple[str, str]]
) -> dict[str, Any]:
    """POST /2010-04-01/Accounts/{sid}/Calls.json (201); the created call's JSON."""
    created = _post(account_sid, auth_token, "Calls.json", form, 201)
    if not isinstance(created.get("sid"), str):
        raise CarrierError("Twilio answered something else than a call")
    return created


def call_update(
    *, account_sid: str, auth_token: str, call_sid: str, form: list[tuple[str, str]]
) -> dict[str, Any]:
    """POST /2010-04-01/Accounts/{sid}/Calls/{CallSid}.json (200): ``Twiml`` replaces what
    the call is doing, ``Status=completed`` hangs it up."""
    return _post(account_sid, auth_token, f"Calls/{call_sid}.json", form, 200)
