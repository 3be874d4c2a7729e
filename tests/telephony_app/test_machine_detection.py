"""Answering machines on outbound calls, per agent: the agent's call settings (REST,
scoped, audited) ask the carrier for detection when a call is placed; a machine then gets
the voicemail message after its beep, or the call is hung up; a person gets the agent.
Through fakes of Twilio's and Telnyx's REST APIs, with signed callbacks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from secrets_app.models import AuditEvent
from sessions_app import services as agent_services
from telephony_app import services as phone_services
from telephony_app.carrier_events import VOICEMAIL_STATE
from telephony_app.models import PhoneCall, PhoneNumber
from tests.factories import TWILIO_SID, TWILIO_TOKEN, Tenant, phone_line
from tests.fakes.telnyx_rest import FakeTelnyxRest
from tests.fakes.twilio_rest import FakeTwilioRest
from tests.telephony_app.carrier import TelnyxSigner, telnyx_event, telnyx_post, twilio_post

PUBLIC = "https://voice.example.com"
CALLEE = "+12125550123"
MESSAGE = "Hi, this is Acme about your order. Please call us back."
TELNYX_KEY = "KEY0123456789telnyx"


@pytest.fixture
def carriers(settings: Any) -> Iterator[tuple[FakeTwilioRest, FakeTelnyxRest]]:
    with (
        FakeTwilioRest(auth_token=TWILIO_TOKEN) as twilio,
        FakeTelnyxRest(api_key=TELNYX_KEY) as telnyx,
    ):
        settings.TWILIO_API_URL, settings.TELNYX_API_URL = twilio.url, telnyx.url
        settings.DEV_ALLOW_PRIVATE_EGRESS = True
        settings.PUBLIC_URL = PUBLIC
        yield twilio, telnyx  # type: ignore[misc]


@pytest.fixture
def twilio_line(owner: Tenant) -> PhoneNumber:
    agent_services.agent_create(workspace=owner.workspace, name="Sales", slug="sales")
    return phone_line(owner.workspace, "sales")[1]


def _settings(api: Any, detection: str, message: str = "") -> Any:
    body = {"machine_detection": detection, "voicemail_message": message}
    return api.put("/api/v1/agents/sales/call-settings", body, format="json")


def _call(api: Any) -> PhoneCall:
    answer = api.post("/api/v1/calls", {"from": "+14155550100", "to": CALLEE}, format="json")
    assert answer.status_code == 201, answer.content
    return PhoneCall.objects.get(call_sid=answer.json()["call_sid"])


def _amd(line: PhoneNumber, call: PhoneCall, answered_by: str) -> int:
    url = f"{PUBLIC}/phone/twilio/{line.uid}/machine"
    form = {"AccountSid": TWILIO_SID, "CallSid": call.call_sid, "AnsweredBy": answered_by}
    return int(twilio_post(Client(), url, form).status_code)


def test_call_settings_are_the_agents_and_checked(
    owner: Tenant, owner_api: Any, outsider_api: Any, twilio_line: PhoneNumber
) -> None:
    assert owner_api.get("/api/v1/agents/sales/call-settings").json()["machine_detection"] == "off"
    assert _settings(owner_api, "leave_message").status_code == 400  # no message to leave
    assert _settings(owner_api, "shout").status_code == 400
    saved = _settings(owner_api, "leave_message", MESSAGE)
    assert saved.status_code == 200 and saved.json()["voicemail_message"] == MESSAGE
    assert AuditEvent.objects.filter(action="agent_call_settings.updated").exists()
    assert _settings(outsider_api, "hang_up").status_code == 404  # not the outsider's agent
    assert outsider_api.get("/api/v1/agents/sales/call-settings").status_code == 404
    assert owner_api.get("/api/v1/agents/sales/call-settings").json()["machine_detection"] == (
        "leave_message"
    )


def test_twilio_leaves_the_message_after_the_beep(
    owner_api: Any, carriers: Any, twilio_line: PhoneNumber
) -> None:
    twilio, _ = carriers
    _settings(owner_api, "leave_message", MESSAGE)
    call = _call(owner_api)
    (placed,) = twilio.requests
    assert placed.value("MachineDetection") == "DetectMessageEnd"
    assert placed.value("AsyncAmd") == "true"
    assert (
        placed.value("AsyncAmdStatusCallback") == f"{PUBLIC}/phone/twilio/{twilio_line.uid}/machine"
    )

    forged_url = f"{PUBLIC}/phone/twilio/{twilio_line.uid}/machine"
    forged = {"AccountSid": TWILIO_SID, "CallSid": call.call_sid, "AnsweredBy": "machine_end_beep"}
    assert twilio_post(Client(), forged_url, forged, token="nope").status_code == 403
    assert not twilio.updates()

    assert _amd(twilio_line, call, "machine_end_beep") == 204
    assert _amd(twilio_line, call, "machine_end_beep") == 204  # repeated: the message once
    (update,) = twilio.updates()
    assert update.path.endswith(f"/Calls/{call.call_sid}.json")
    assert update.value("Twiml") == (
        f'<?xml version="1.0" encoding="UTF-8"?><Response><Say>{MESSAGE}</Say><Hangup /></Response>'
    )
    call.refresh_from_db()
    assert call.answered_by == "machine_end_beep"
    assert [entry["step"] for entry in call.statuses if "step" in entry] == ["voicemail"]


def test_twilio_hangs_up_on_a_machine_and_not_on_a_person(
    owner_api: Any, carriers: Any, twilio_line: PhoneNumber
) -> None:
    twilio, _ = carriers
    _settings(owner_api, "hang_up")
    person, machine = _call(owner_api), _call(owner_api)
    assert twilio.requests[0].value("MachineDetection") == "Enable"
    assert _amd(twilio_line, person, "human") == 204
    assert not twilio.updates()
    assert _amd(twilio_line, machine, "machine_start") == 204
    (update,) = twilio.updates()
    assert update.path.endswith(f"/Calls/{machine.call_sid}.json")
    assert update.form == [("Status", "completed")]


def test_no_detection_unless_the_agent_asks(
    owner_api: Any, carriers: Any, twilio_line: PhoneNumber
) -> None:
    twilio, _ = carriers
    call = _call(owner_api)
    assert not twilio.requests[0].values("MachineDetection")
    assert _amd(twilio_line, call, "machine_end_beep") == 204  # recorded, nothing done
    assert not twilio.updates()


@pytest.fixture
def telnyx_line(owner: Tenant, signer: TelnyxSigner) -> PhoneNumber:
    agent_services.agent_create(workspace=owner.workspace, name="Sales", slug="sales")
    phone_services.carrier_account_create(
        workspace=owner.workspace, carrier="telnyx", name="Tx", credential=TELNYX_KEY,
        public_key=signer.public_key, connection_id="1494404757140276705",
    )  # fmt: skip
    return phone_services.phone_number_create(
        workspace=owner.workspace, account="Tx", number="+14155550100", agent="sales"
    )


@pytest.fixture
def signer() -> TelnyxSigner:
    return TelnyxSigner()


def test_telnyx_leaves_the_message_after_the_greeting_then_hangs_up(
    owner_api: Any, carriers: Any, telnyx_line: PhoneNumber, signer: TelnyxSigner
) -> None:
    _, telnyx = carriers
    _settings(owner_api, "leave_message", MESSAGE)
    call = _call(owner_api)
    assert telnyx.dials()[0].body["answering_machine_detection"] == "detect_beep"
    url, client = f"{PUBLIC}/phone/telnyx/{telnyx_line.uid}/status", Client()

    def event(kind: str, **payload: Any) -> int:
        body = telnyx_event(kind, call.call_sid, **payload)
        return int(telnyx_post(client, url, body, signer).status_code)

    assert event("call.answered") == 204
    assert event("call.machine.detection.ended", result="machine") == 204
    assert not telnyx.commands()  # leave_message waits for the beep
    assert event("call.machine.greeting.ended", result="beep_detected") == 204
    assert [c for c, _ in telnyx.commands()] == ["streaming_stop", "speak"]
    speak = telnyx.commands()[1][1]
    assert speak["payload"] == MESSAGE and speak["client_state"] == VOICEMAIL_STATE
    assert all(r.call_control_id == call.call_sid for r in telnyx.requests if r.command)
    assert event("call.speak.ended", client_state=VOICEMAIL_STATE) == 204
    assert [c for c, _ in telnyx.commands()][-1] == "hangup"
    call.refresh_from_db()
    assert call.answered_by == "machine"


def test_telnyx_hangs_up_on_a_machine(
    owner_api: Any, carriers: Any, telnyx_line: PhoneNumber, signer: TelnyxSigner
) -> None:
    _, telnyx = carriers
    _settings(owner_api, "hang_up")
    call = _call(owner_api)
    assert telnyx.dials()[0].body["answering_machine_detection"] == "detect"
    url = f"{PUBLIC}/phone/telnyx/{telnyx_line.uid}/status"
    human = telnyx_event("call.machine.detection.ended", call.call_sid, result="human")
    telnyx_post(Client(), url, human, signer)
    assert not telnyx.commands()
    machine = telnyx_event("call.machine.detection.ended", call.call_sid, result="machine")
    telnyx_post(Client(), url, machine, signer)
    assert [c for c, _ in telnyx.commands()] == ["hangup"]
