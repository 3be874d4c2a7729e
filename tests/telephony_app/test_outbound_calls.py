"""POST /api/v1/calls through a fake of Twilio's REST API: the call is created with the
TwiML that connects it to our stream, its signed status callbacks are recorded, forged
ones refused; a carrier refusal is a 502 that quotes no number; calls are rate-limited
and the outsider cannot call from the owner's number."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from secrets_app.models import AuditEvent
from sessions_app import services as agent_services
from sessions_app.models import SessionToken
from telephony_app.models import PhoneCall
from tests.factories import TWILIO_SID, TWILIO_TOKEN, Tenant, phone_line
from tests.fakes.twilio_rest import FakeTwilioRest
from tests.telephony_app.carrier import twilio_post

PUBLIC = "https://voice.example.com"
CALLEE = "+12125550123"


@pytest.fixture
def twilio(settings: Any) -> Iterator[FakeTwilioRest]:
    with FakeTwilioRest() as fake:
        settings.TWILIO_API_URL = fake.url
        settings.DEV_ALLOW_PRIVATE_EGRESS = True
        settings.PUBLIC_URL = PUBLIC
        yield fake


@pytest.fixture
def line(owner: Tenant) -> Any:
    agent_services.agent_create(workspace=owner.workspace, name="Sales", slug="sales")
    return phone_line(owner.workspace, "sales")[1]


def _call(api: Any, **body: Any) -> Any:
    body = {"from": "+14155550100", "to": CALLEE, **body}
    return api.post("/api/v1/calls", body, format="json")


def test_a_call_is_placed_and_its_statuses_recorded(
    owner: Tenant, owner_api: Any, twilio: FakeTwilioRest, line: Any
) -> None:
    answer = _call(owner_api, variables={"order": "A-1042"})
    assert answer.status_code == 201, answer.content
    (sent,) = twilio.requests
    assert sent.path == f"/2010-04-01/Accounts/{TWILIO_SID}/Calls.json"
    assert (sent.account, sent.token) == (TWILIO_SID, TWILIO_TOKEN)
    assert sent.value("To") == CALLEE and sent.value("From") == "+14155550100"
    assert '<Stream url="wss://voice.example.com/phone/twilio/stream">' in sent.value("Twiml")
    token = re.search(r'name="token" value="(st_[^"]+)"', sent.value("Twiml"))
    assert token is not None
    status_url = f"{PUBLIC}/phone/twilio/{line.uid}/status"
    assert sent.value("StatusCallback") == status_url
    assert sent.values("StatusCallbackEvent") == ["initiated", "ringing", "answered", "completed"]
    minted = SessionToken.objects.get()
    assert minted.variables == {"order": "A-1042", "caller": "+14155550100", "called": CALLEE}
    call = PhoneCall.objects.get()
    assert answer.json()["call_sid"] == call.call_sid and call.call_sid.startswith("CA")
    assert answer.json()["direction"] == "outbound" and answer.json()["other_end"] == CALLEE
    assert AuditEvent.objects.filter(action="phone_call.placed").exists()

    client = Client()
    form = {"AccountSid": TWILIO_SID, "CallSid": call.call_sid, "To": CALLEE}
    forged = twilio_post(client, status_url, {**form, "CallStatus": "busy"}, token="nope")
    assert forged.status_code == 403
    for status in ("ringing", "in-progress"):
        assert twilio_post(client, status_url, {**form, "CallStatus": status}).status_code == 204
    done = {**form, "CallStatus": "completed", "CallDuration": "42"}
    assert twilio_post(client, status_url, done).status_code == 204
    # A callback repeated (a retry, or a signed request captured and replayed) changes
    # nothing, and nothing comes after the end.
    for replayed in ({**form, "CallStatus": "ringing"}, done, {**done, "CallDuration": "9"}):
        assert twilio_post(client, status_url, replayed).status_code == 204
    call.refresh_from_db()
    assert [s["status"] for s in call.statuses] == ["ringing", "in-progress", "completed"]
    assert call.status == "completed" and call.duration_ms == 42_000 and call.ended_at
    unknown = {**form, "CallSid": "CA" + "9" * 32, "CallStatus": "ringing"}
    assert twilio_post(client, status_url, unknown).status_code == 404


def test_a_carrier_refusal_is_a_502_that_quotes_no_number(
    owner_api: Any, twilio: FakeTwilioRest, line: Any
) -> None:
    twilio.fail_with = 400
    answer = _call(owner_api)
    assert answer.status_code == 502
    assert answer.json()["error"]["code"] == "carrier_error"
    assert CALLEE not in answer.content.decode() and "unverified" not in answer.content.decode()
    assert PhoneCall.objects.get().status == "failed"


def test_calls_are_rate_limited_per_workspace(
    owner_api: Any, twilio: FakeTwilioRest, line: Any, settings: Any
) -> None:
    settings.OUTBOUND_CALLS_PER_MINUTE = 2
    assert [_call(owner_api).status_code for _ in range(3)] == [201, 201, 429]
    assert len(twilio.requests) == 2


def test_bad_numbers_and_the_outsider_are_refused(
    owner: Tenant, outsider_api: Any, owner_api: Any, twilio: FakeTwilioRest, line: Any
) -> None:
    assert _call(owner_api, to="12345").status_code == 400
    assert _call(owner_api, **{"from": "+14155550999"}).status_code == 400
    refused = _call(outsider_api)  # the owner's number
    assert refused.status_code == 400 and "from" in refused.json()["error"]["fields"]
    assert not twilio.requests and not PhoneCall.objects.exists()


def test_premium_foreign_and_unassigned_numbers_are_not_rung(
    owner_api: Any, twilio: FakeTwilioRest, line: Any, settings: Any
) -> None:
    """What a leaked calls:write key would be used for (toll fraud) is refused before
    the carrier is asked; another country is rung once the operator enables it."""
    refusals = {
        "+19005550100": "premium-rate",  # US 900
        "+448712345678": "premium-rate",  # UK 0871
        "+447012345678": "personal",  # UK 070, forwarding
        "+447700900123": "numbering plan",  # reserved for drama, assigned to nobody
        "+33612345678": "not enabled",  # a French mobile, from a US number
    }
    for number, why in refusals.items():
        answer = _call(owner_api, to=number)
        assert answer.status_code == 400, number
        assert why in answer.json()["error"]["message"], (number, answer.json())
    assert not twilio.requests and not PhoneCall.objects.exists()
    settings.OUTBOUND_CALL_COUNTRIES = ["FR"]
    assert _call(owner_api, to="+33612345678").status_code == 201


def test_calls_are_listed_for_their_workspace_only(
    owner_api: Any, outsider_api: Any, twilio: FakeTwilioRest, line: Any
) -> None:
    placed = _call(owner_api).json()
    listed = owner_api.get("/api/v1/calls").json()
    assert [c["call_sid"] for c in listed["results"]] == [placed["call_sid"]]
    detail = owner_api.get(f"/api/v1/calls/{placed['id']}")
    assert detail.status_code == 200 and detail.json()["other_end"] == CALLEE
    assert outsider_api.get("/api/v1/calls").json()["results"] == []
    assert outsider_api.get(f"/api/v1/calls/{placed['id']}").status_code == 404
