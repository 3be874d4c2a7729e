"""What a carrier sends: signed voice webhooks, as Twilio and Telnyx sign them."""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any
from urllib.parse import urlencode

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from twilio.request_validator import RequestValidator

# The test Twilio account (no Django here: benchmarks import this module too).
TWILIO_SID = "AC" + "0123456789abcdef" * 2
TWILIO_TOKEN = "twilio-auth-token-for-tests"


def twilio_voice_form(
    call_sid: str, *, caller: str = "+447700900123", to: str = "+14155550100"
) -> dict[str, str]:
    return {
        "AccountSid": TWILIO_SID, "CallSid": call_sid, "From": caller, "To": to,
        "CallStatus": "ringing", "Direction": "inbound",
    }  # fmt: skip


def twilio_signature(url: str, form: dict[str, str], token: str = TWILIO_TOKEN) -> str:
    return str(RequestValidator(token).compute_signature(url, form))


def twilio_post(client: Any, url: str, form: dict[str, str], *, token: str = TWILIO_TOKEN) -> Any:
    """POST ``form`` to ``url`` (absolute, as the carrier saw it) signed with ``token``."""
    path = url.split("://", 1)[1].split("/", 1)[1]
    return client.post(
        "/" + path, urlencode(form), content_type="application/x-www-form-urlencoded",
        headers={"X-Twilio-Signature": twilio_signature(url, form, token)},
    )  # fmt: skip


class TelnyxSigner:
    def __init__(self) -> None:
        self.key = Ed25519PrivateKey.generate()
        raw = self.key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.public_key = base64.b64encode(raw).decode()

    def headers(self, body: bytes, *, at: float | None = None) -> dict[str, str]:
        stamp = str(int(time.time() if at is None else at))
        signature = self.key.sign(f"{stamp}|".encode() + body)
        return {
            "Telnyx-Signature-Ed25519": base64.b64encode(signature).decode(),
            "Telnyx-Timestamp": stamp,
        }


def telnyx_event(event_type: str, call_control_id: str, **payload: Any) -> bytes:
    """A Call Control webhook as Telnyx posts it (``data.event_type``, ``data.payload``)."""
    return json.dumps({
        "data": {
            "event_type": event_type, "id": str(uuid.uuid4()), "record_type": "event",
            "occurred_at": "2026-11-28T02:00:00.000000Z",
            "payload": {"call_control_id": call_control_id, "connection_id": "1234567890",
                        "call_leg_id": str(uuid.uuid4()), **payload},
        },
        "meta": {"attempt": 1, "delivered_to": "https://voice.example.com/"},
    }).encode()  # fmt: skip


def telnyx_post(client: Any, url: str, body: bytes, signer: TelnyxSigner) -> Any:
    path = url.split("://", 1)[1].split("/", 1)[1]
    return client.post(
        "/" + path, body, content_type="application/json", headers=signer.headers(body)
    )


def telnyx_call_answered(
    workspace: Any, *, agent: str, call_id: str, public_url: str, api_key: str = "KEY_x"
) -> str:
    """A Telnyx account and number answered by ``agent``, and the markup its signed voice
    webhook got for the call ``call_id`` (it carries the stream's token)."""
    from django.test import Client

    from telephony_app import links, services

    signer = TelnyxSigner()
    services.carrier_account_create(
        workspace=workspace, carrier="telnyx", name="Tx", credential=api_key,
        public_key=signer.public_key,
    )  # fmt: skip
    phone = services.phone_number_create(
        workspace=workspace, account="Tx", number="+14155550111", agent=agent
    )
    body = json.dumps({"CallSid": call_id, "From": "+15550001", "To": phone.number}).encode()
    answered = Client().post(
        links.voice_webhook_url(phone, public_url).removeprefix(public_url), body,
        content_type="application/json", headers=signer.headers(body),
    )  # fmt: skip
    return str(answered.content.decode())
