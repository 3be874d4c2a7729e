"""A fake of Twilio's REST API, the part that places and changes calls: ``POST
/2010-04-01/Accounts/{AccountSid}/Calls.json`` (201 and the call's JSON) and ``POST
.../Calls/{CallSid}.json`` (200: new ``Twiml``, or ``Status=completed``), with HTTP basic
auth (Account SID and auth token; a wrong token is Twilio's 401 error 20003) and a form
body; an error body when told to fail."""

from __future__ import annotations

import base64
import re
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from tests.fakes.carrier_rest import JsonApiFake, Received

CALL_PATH = re.compile(r"^/2010-04-01/Accounts/(AC[0-9a-f]{32})/Calls(?:/(CA[0-9a-f]{32}))?\.json$")


@dataclass(frozen=True)
class CallRequest:
    path: str
    account: str  # the basic-auth user
    token: str  # the basic-auth password
    form: list[tuple[str, str]]

    def value(self, name: str) -> str:
        return next(v for k, v in self.form if k == name)

    def values(self, name: str) -> list[str]:
        return [v for k, v in self.form if k == name]


class FakeTwilioRest(JsonApiFake):
    def __init__(self, *, auth_token: str | None = None) -> None:
        super().__init__()
        self.requests: list[CallRequest] = []
        self.auth_token = auth_token  # when set, other tokens get 401
        self.fail_with: int | None = None  # answer this status instead of creating a call

    def respond(self, received: Received) -> tuple[int, dict[str, Any]]:
        auth = received.headers.get("Authorization", "").removeprefix("Basic ")
        user, _, password = base64.b64decode(auth or b"").decode().partition(":")
        request = CallRequest(received.path, user, password, parse_qsl(received.body.decode()))
        self.requests.append(request)
        route = CALL_PATH.match(received.path)
        if route is None or route.group(1) != user:
            return 404, {"code": 20404, "message": "not found", "status": 404}
        if self.auth_token is not None and password != self.auth_token:
            return 401, {"code": 20003, "message": "Authenticate", "status": 401}
        if self.fail_with is not None:
            message = f"The number {dict(request.form).get('To', '')} is unverified."
            return self.fail_with, {"code": 21219, "message": message, "status": self.fail_with}
        if route.group(2):
            return 200, self.call_json(request, sid=route.group(2), status="in-progress")
        return 201, self.call_json(request)

    @staticmethod
    def call_json(
        request: CallRequest, *, sid: str | None = None, status: str = "queued"
    ) -> dict[str, Any]:
        form = dict(request.form)
        return {
            "sid": sid or "CA" + secrets.token_hex(16), "account_sid": request.account,
            "to": form.get("To", ""), "from": form.get("From", ""), "status": status,
            "direction": "outbound-api", "api_version": "2010-04-01",
        }  # fmt: skip

    def updates(self) -> list[CallRequest]:
        """Requests that changed a live call."""
        return [r for r in self.requests if re.search(r"/Calls/CA[0-9a-f]+\.json$", r.path)]
