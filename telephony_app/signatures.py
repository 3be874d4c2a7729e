"""Is this request from the carrier? Twilio signs with the account's auth token (HMAC-SHA1
over the URL and the form, checked by the ``twilio`` package); Telnyx signs with Ed25519
over ``timestamp|body``, checked with the account's public key and a tolerance window."""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.conf import settings
from twilio.request_validator import RequestValidator


def twilio_valid(*, auth_token: str, url: str, params: Mapping[str, str], signature: str) -> bool:
    if not signature:
        return False
    return bool(RequestValidator(auth_token).validate(url, dict(params), signature))


def telnyx_valid(
    *, public_key: str, body: bytes, signature: str, timestamp: str, now: float | None = None
) -> bool:
    """Valid and fresh: a timestamp outside ``TELNYX_SIGNATURE_TOLERANCE_S`` is refused
    even with a good signature (an old request replayed)."""
    try:
        sent_at = int(timestamp)
        raw_signature = base64.b64decode(signature, validate=True)
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key))
    except (ValueError, binascii.Error):
        return False
    if abs((time.time() if now is None else now) - sent_at) > settings.TELNYX_SIGNATURE_TOLERANCE_S:
        return False
    try:
        key.verify(raw_signature, f"{timestamp}|".encode() + body)
    except InvalidSignature:
        return False
    return True
