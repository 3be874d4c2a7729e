"""Examples of the carrier-account and phone-number operations for the OpenAPI schema.
Placeholders only: nothing here is a working credential."""

from __future__ import annotations

from typing import Any

from core.api_examples import invalid, request, response

_TWILIO: dict[str, Any] = {
    "id": 3,
    "carrier": "twilio",
    "name": "Main Twilio",
    "account_sid": "AC0123456789abcdef0123456789abcdef",
    "public_key": "",
    "connection_id": "",
    "credential_last4": "9f3a",
    "created_at": "2025-06-03T09:14:07Z",
    "updated_at": "2025-06-03T09:14:07Z",
}
_NUMBER: dict[str, Any] = {
    "id": 8,
    "number": "+14155550123",
    "account": "Main Twilio",
    "carrier": "twilio",
    "agent": "support",
    "label": "Support line",
    "voice_webhook_url": "https://voice.example.com/phone/twilio/Xy12…/voice",
    "created_at": "2025-06-03T09:20:00Z",
    "updated_at": "2025-06-03T09:20:00Z",
}

_TELNYX: dict[str, Any] = {
    **_TWILIO,
    "id": 4,
    "carrier": "telnyx",
    "name": "Telnyx",
    "account_sid": "",
    "public_key": "pWXAwe8lRFF0Ea1EdhGu3ANPZ+kw3j3mnPlmDMtUxxk=",
    "connection_id": "1494404757140276705",
    "credential_last4": "Q2xq",
}

ACCOUNT_LIST = [response("A Twilio account", _TWILIO)]
ACCOUNT_DETAIL = [response("A Twilio account", _TWILIO)]
ACCOUNT_CREATE = [
    request(
        "A Twilio account",
        {
            "carrier": "twilio",
            "name": "Main Twilio",
            "account_sid": "AC0123456789abcdef0123456789abcdef",
            "credential": "your-twilio-auth-token",
        },
    ),
    request(
        "A Telnyx account that places calls",
        {
            "carrier": "telnyx",
            "name": "Telnyx",
            "public_key": "pWXAwe8lRFF0Ea1EdhGu3ANPZ+kw3j3mnPlmDMtUxxk=",
            "connection_id": "1494404757140276705",
            "credential": "KEY-your-telnyx-api-key",
        },
    ),
    response("The new account", _TWILIO, 201),
    response("The new Telnyx account", _TELNYX, 201),
    invalid("account_sid", "must be AC followed by 32 hex digits"),
]
ACCOUNT_UPDATE = [
    request("A new auth token", {"credential": "your-new-twilio-auth-token"}),
    response("The account", _TWILIO),
]
NUMBER_LIST = [response("A Twilio number", _NUMBER)]
NUMBER_DETAIL = [response("A Twilio number", _NUMBER)]
NUMBER_CREATE = [
    request(
        "A number answered by the support agent",
        {
            "account": "Main Twilio",
            "number": "+14155550123",
            "agent": "support",
            "label": "Support line",
        },
    ),
    response("The new number", _NUMBER, 201),
    invalid("number", "must be an E.164 number like +14155550123"),
]
NUMBER_UPDATE = [
    request("A new label", {"label": "Night line"}),
    response("The number", {**_NUMBER, "label": "Night line"}),
]

_CALL: dict[str, Any] = {
    "id": 41,
    "call_sid": "CA0123456789abcdef0123456789abcdef",
    "direction": "outbound",
    "status": "queued",
    "number": "+14155550199",
    "other_end": "+14155550123",
    "statuses": [],
    "answered_by": "",
    "started_at": "2025-06-03T09:30:00Z",
    "ended_at": None,
    "duration_ms": 0,
}
_ENDED_CALL: dict[str, Any] = {
    **_CALL,
    "status": "completed",
    "statuses": [
        {"status": "initiated", "at": "2025-06-03T09:30:00Z"},
        {"status": "ringing", "at": "2025-06-03T09:30:01Z"},
        {"status": "in-progress", "at": "2025-06-03T09:30:06Z"},
        {"status": "completed", "at": "2025-06-03T09:31:48Z"},
    ],
    "answered_by": "human",
    "ended_at": "2025-06-03T09:31:48Z",
    "duration_ms": 102_000,
}
CALL_PAGE = [
    response(
        "A page of calls",
        {
            "next": "https://voice.example.com/api/v1/calls?cursor=cD0yMDI1LTA2",
            "previous": None,
            "results": [_ENDED_CALL],
        },
    )
]
CALL_DETAIL = [response("A call that was answered and completed", _ENDED_CALL)]
CALL_CREATE = [
    request(
        "Call a customer with the number's agent",
        {"from": "+14155550199", "to": "+14155550123", "variables": {"order": "A-1042"}},
    ),
    response("The call, queued at the carrier", _CALL, 201),
    invalid("from", "not one of the workspace's numbers"),
    response(
        "The carrier refused or could not be reached",
        {"error": {"code": "carrier_error", "message": "Twilio refused the call (HTTP 400)"}},
        502,
    ),
]

CALL_SETTINGS = [
    response(
        "Leave a message on answering machines",
        {
            "agent": "sales",
            "machine_detection": "leave_message",
            "voicemail_message": "Hi, this is Acme about your order. Please call us back.",
            "updated_at": "2025-06-03T09:40:00Z",
        },
    )
]
CALL_SETTINGS_UPDATE = [
    request(
        "Leave a message on answering machines",
        {
            "machine_detection": "leave_message",
            "voicemail_message": "Hi, this is Acme about your order. Please call us back.",
        },
    ),
    request("Hang up on answering machines", {"machine_detection": "hang_up"}),
    CALL_SETTINGS[0],
    invalid("voicemail_message", "say what the message is"),
]
