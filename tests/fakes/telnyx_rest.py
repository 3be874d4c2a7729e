"""A fake of Telnyx's Call Control API: ``POST /v2/calls`` (dial: ``connection_id``,
``to``, ``from`` required; 200 and ``{"data": {"call_control_id", "call_leg_id",
"call_session_id", "is_alive", "record_type": "call"}}``) and ``POST
/v2/calls/{call_control_id}/actions/{command}`` (200 ``{"data": {"result": "ok"}}``), with
the API key as a bearer token (401 otherwise) and Telnyx's ``{"errors": [...]}`` bodies."""

from __future__ import annotations

import json
import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from tests.fakes.carrier_rest import JsonApiFake, Received

ACTION_PATH = re.compile(r"^/v2/calls/([^/]+)/actions/([a-z_]+)$")
DIAL_REQUIRED = ("connection_id", "to", "from")


@dataclass(frozen=True)
class TelnyxRequest:
    path: str
    api_key: str
    body: dict[str, Any]
    call_control_id: str = ""  # of a command
    command: str = ""


def _error(status: int, code: str, title: str, detail: str) -> tuple[int, dict[str, Any]]:
    return status, {"errors": [{"code": code, "title": title, "detail": detail}]}


class FakeTelnyxRest(JsonApiFake):
    def __init__(self, *, api_key: str) -> None:
        super().__init__()
        self.api_key = api_key
        self.requests: list[TelnyxRequest] = []
        self.fail_with: int | None = None

    def respond(self, received: Received) -> tuple[int, dict[str, Any]]:
        key = received.headers.get("Authorization", "").removeprefix("Bearer ")
        try:
            body = json.loads(received.body or b"{}")
        except ValueError:
            return _error(400, "10015", "Bad Request", "The request body is not JSON.")
        action = ACTION_PATH.match(received.path)
        request = TelnyxRequest(
            received.path, key, body,
            unquote(action.group(1)) if action else "", action.group(2) if action else "",
        )  # fmt: skip
        self.requests.append(request)
        if key != self.api_key:
            return _error(401, "10009", "Authentication failed", "Could not understand the key.")
        if self.fail_with is not None:
            detail = f"The destination number {body.get('to')} is not enabled for calls."
            return _error(self.fail_with, "10010", "Invalid destination", detail)
        if action is not None:
            return 200, {"data": {"result": "ok"}}
        if received.path != "/v2/calls":
            return _error(404, "10005", "Resource not found", "The path does not exist.")
        missing = [name for name in DIAL_REQUIRED if not body.get(name)]
        if missing:
            return _error(422, "10032", "Missing required parameter", ", ".join(missing))
        return 200, {"data": {
            "call_control_id": "v3:" + secrets.token_urlsafe(40),
            "call_leg_id": str(uuid.uuid4()), "call_session_id": str(uuid.uuid4()),
            "client_state": body.get("client_state"), "is_alive": False, "record_type": "call",
        }}  # fmt: skip

    def dials(self) -> list[TelnyxRequest]:
        return [r for r in self.requests if r.path == "/v2/calls"]

    def commands(self) -> list[tuple[str, dict[str, Any]]]:
        return [(r.command, r.body) for r in self.requests if r.command]
