"""Stripe's signature scheme: ``Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>``.

The HMAC's key is the endpoint's signing secret (the whole ``whsec_…`` string) and its
message is the timestamp, a dot, and the raw body. A receiver recomputes it, compares in
constant time and refuses a timestamp older than its tolerance (replays).
"""

from __future__ import annotations

import hashlib
import hmac

from secrets_app.crypto import random_token

HEADER = "Signature"
SECRET_PREFIX = "whsec_"
SECRET_RANDOM_LENGTH = 32


def new_signing_secret() -> str:
    return SECRET_PREFIX + random_token(SECRET_RANDOM_LENGTH)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return mac.hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    return f"t={timestamp},v1={signature(secret, timestamp, body)}"
