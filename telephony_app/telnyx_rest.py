"""Telnyx's Call Control API: dial (``POST /v2/calls``) and commands on a live call
(``POST /v2/calls/{call_control_id}/actions/{command}``), with the account's API key as
a bearer token and JSON both ways."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from django.conf import settings

from telephony_app.carrier_rest import CarrierError, carrier_request


def _post(api_key: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = carrier_request(
        carrier="Telnyx",
        url=f"{settings.TELNYX_API_URL}/v2/{path}",
        headers={
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        },
        body=json.dumps(body),
        expect=200,
    )
    data = answer.get("data")
    if not isinstance(data, dict):
        raise CarrierError("Telnyx answered something else than a call")
    return data


def call_dial(*, api_key: str, body: dict[str, Any]) -> dict[str, Any]:
    """The dialled call (``call_control_id``, ``call_leg_id``, ``call_session_id``…)."""
    data = _post(api_key, "calls", body)
    if not isinstance(data.get("call_control_id"), str):
        raise CarrierError("Telnyx answered something else than a call")
    return data


def call_command(
    *, api_key: str, call_control_id: str, command: str, body: dict[str, Any] | None = None
) -> None:
    """``hangup``, ``speak``, ``streaming_stop``… on a live call."""
    _post(api_key, f"calls/{quote(call_control_id, safe='')}/actions/{command}", body or {})
