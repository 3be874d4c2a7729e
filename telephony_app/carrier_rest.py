"""The carriers' REST APIs, dialled through the platform's egress guard like every other
URL the platform calls for a customer. One request helper; ``twilio_rest`` and
``telnyx_rest`` say what to send."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync

from core import outbound
from egress import client as egress

RESPONSE_MAX_BYTES = 256 * 1024
TIMEOUT_S = 15.0


class CarrierError(Exception):
    """The carrier refused the request or could not be reached (fixed words, no echo of
    what the carrier said: it may quote numbers)."""


def carrier_request(
    *, carrier: str, url: str, headers: dict[str, str], body: str, expect: int
) -> dict[str, Any]:
    """POST ``body`` to ``url``; the answer's JSON object when the status is ``expect``."""
    request = egress.FetchRequest(url, "POST", headers, body)
    policy = egress.EgressPolicy(
        guard=outbound.policy(),
        max_response_bytes=RESPONSE_MAX_BYTES,
        timeout_s=TIMEOUT_S,
        max_redirects=0,
    )
    try:
        response = async_to_sync(egress.fetch)(request, policy=policy)
    except egress.EgressError:
        raise CarrierError(f"{carrier} could not be reached") from None
    if response.status != expect:
        raise CarrierError(f"{carrier} refused the request (HTTP {response.status})")
    try:
        answer = json.loads(response.body)
    except (ValueError, RecursionError):
        answer = None
    if not isinstance(answer, dict):
        raise CarrierError(f"{carrier} answered something else than JSON")
    return answer
