"""POST /api/v1/calls from a Telnyx number, through a fake of Telnyx's Call Control API:
the dial carries our stream (its single-use token in the URL), PCMU both ways and our
signed webhook; Call Control's events (answered, hangup with its cause) are recorded in
the same words as Twilio's, forged ones refused; a refusal is a 502 that quotes no
number; the stream Telnyx opens with that URL starts the agent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from platform_site.asgi import application
from sessions_app import services as agent_services
from telephony_app import services as phone_services
from telephony_app.models import PhoneCall, PhoneNumber
from tests.engine.providers.llm.openai.fake_server import Done, Finish, text_reply, tool_call
from tests.factories import Tenant
from tests.fakes.telnyx_rest import FakeTelnyxRest
from tests.sessions_app.conftest import no_leases  # noqa: F401  (a fixture)
from tests.telephony_app.calls import ended_call
from tests.telephony_app.carrier import TelnyxSigner, telnyx_event, telnyx_post

PUBLIC = "https://voice.example.com"
CALLEE = "+12125550123"
API_KEY = "KEY0123456789telnyx"
CONNECTION = "1494404757140276705"


@pytest.fixture
def telnyx(settings: Any) -> Iterator[FakeTelnyxRest]:
    with FakeTelnyxRest(api_key=API_KEY) as fake:
        settings.TELNYX_API_URL = fake.url
        settings.DEV_ALLOW_PRIVATE_EGRESS = True
        settings.PUBLIC_URL = PUBLIC
        yield fake  # type: ignore[misc]


@pytest.fixture
def signer() -> TelnyxSigner:
    return TelnyxSigner()


@pytest.fixture
def line(owner: Tenant, signer: TelnyxSigner) -> PhoneNumber:
    agent_services.agent_create(workspace=owner.workspace, name="Sales", slug="sales")
    phone_services.carrier_account_create(
        workspace=owner.workspace, carrier="telnyx", name="Tx", credential=API_KEY,
        public_key=signer.public_key, connection_id=CONNECTION,
    )  # fmt: skip
    return phone_services.phone_number_create(
        workspace=owner.workspace, account="Tx", number="+14155550100", agent="sales"
    )


def _call(api: Any, **body: Any) -> Any:
    return api.post("/api/v1/calls", {"from": "+14155550100", "to": CALLEE, **body}, format="json")


def test_a_telnyx_call_is_dialled_and_its_events_recorded(
    owner_api: Any, telnyx: FakeTelnyxRest, line: PhoneNumber, signer: TelnyxSigner
) -> None:
    answer = _call(owner_api, variables={"order": "A-1042"})
    assert answer.status_code == 201, answer.content
    (dial,) = telnyx.dials()
    assert dial.api_key == API_KEY
    assert (dial.body["connection_id"], dial.body["to"], dial.body["from"]) == (
        CONNECTION, CALLEE, "+14155550100",
    )  # fmt: skip
    stream = urlsplit(dial.body["stream_url"])
    assert f"{stream.scheme}://{stream.netloc}{stream.path}" == (
        "wss://voice.example.com/phone/telnyx/stream"
    )
    assert parse_qs(stream.query)["token"][0].startswith("st_")
    assert dial.body["stream_bidirectional_mode"] == "rtp"
    assert dial.body["stream_bidirectional_codec"] == "PCMU"
    status_url = f"{PUBLIC}/phone/telnyx/{line.uid}/status"
    assert dial.body["webhook_url"] == status_url
    assert "answering_machine_detection" not in dial.body  # the agent did not ask for it
    call = PhoneCall.objects.get()
    assert call.call_sid.startswith("v3:") and answer.json()["call_sid"] == call.call_sid

    client = Client()
    forged = telnyx_event("call.hangup", call.call_sid, hangup_cause="user_busy")
    assert telnyx_post(client, status_url, forged, TelnyxSigner()).status_code == 403
    for event in ("call.initiated", "call.answered", "streaming.started"):
        assert (
            telnyx_post(client, status_url, telnyx_event(event, call.call_sid), signer).status_code
            == 204
        )
    hangup = telnyx_event("call.hangup", call.call_sid, hangup_cause="normal_clearing")
    assert telnyx_post(client, status_url, hangup, signer).status_code == 204
    call.refresh_from_db()
    assert [s["status"] for s in call.statuses] == ["initiated", "in-progress", "completed"]
    assert call.status == "completed" and call.ended_at is not None
    unknown = telnyx_event("call.answered", "v3:not-ours")
    assert telnyx_post(client, status_url, unknown, signer).status_code == 404


@pytest.mark.parametrize(
    ("cause", "status"),
    [("user_busy", "busy"), ("timeout", "no-answer"), ("call_rejected", "failed")],
)
def test_an_unanswered_telnyx_call_says_why(
    owner_api: Any, telnyx: FakeTelnyxRest, line: PhoneNumber, signer: TelnyxSigner,
    cause: str, status: str,
) -> None:  # fmt: skip
    assert _call(owner_api).status_code == 201
    call = PhoneCall.objects.get()
    url = f"{PUBLIC}/phone/telnyx/{line.uid}/status"
    telnyx_post(
        Client(), url, telnyx_event("call.hangup", call.call_sid, hangup_cause=cause), signer
    )
    call.refresh_from_db()
    assert call.status == status and call.ended_at is not None and call.duration_ms == 0


def test_a_telnyx_refusal_is_a_502_that_quotes_no_number(
    owner_api: Any, telnyx: FakeTelnyxRest, line: PhoneNumber
) -> None:
    telnyx.fail_with = 422
    answer = _call(owner_api)
    assert answer.status_code == 502 and answer.json()["error"]["code"] == "carrier_error"
    assert CALLEE not in answer.content.decode()
    assert PhoneCall.objects.get().status == "failed"


def test_a_wrong_telnyx_key_is_a_502(
    owner_api: Any, telnyx: FakeTelnyxRest, line: PhoneNumber
) -> None:
    phone_services.carrier_account_update(account=line.account, credential="KEY-revoked-0000")
    answer = _call(owner_api)
    assert answer.status_code == 502 and "HTTP 401" in answer.json()["error"]["message"]
    assert telnyx.requests[0].api_key == "KEY-revoked-0000"


def test_a_telnyx_account_without_its_application_cannot_place_calls(
    owner: Tenant, owner_api: Any, telnyx: FakeTelnyxRest, line: PhoneNumber
) -> None:
    phone_services.carrier_account_update(account=line.account, connection_id="")
    refused = _call(owner_api)
    assert refused.status_code == 400 and "Call Control" in str(refused.json())
    assert not telnyx.requests


def test_the_outsider_cannot_call_from_the_owners_telnyx_number(
    outsider_api: Any, telnyx: FakeTelnyxRest, line: PhoneNumber
) -> None:
    assert _call(outsider_api).status_code == 400
    assert not telnyx.requests


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("no_leases")
async def test_the_stream_telnyx_opens_for_a_dialled_call_starts_the_agent(
    owner_api: Any, telnyx: FakeTelnyxRest, line: PhoneNumber
) -> None:
    await sync_to_async(agent_services.agent_update)(agent=line.agent, greeting="Hello, it's Acme.")
    assert (await sync_to_async(_call)(owner_api)).status_code == 201
    (dial,) = telnyx.dials()
    stream = urlsplit(dial.body["stream_url"])
    call = await sync_to_async(PhoneCall.objects.get)()
    for query in ("token=st_forged", stream.query):  # a forged token first: closed
        socket = WebsocketCommunicator(application, f"{stream.path}?{query}")
        assert (await socket.connect(timeout=10))[0]
        start = {"call_control_id": call.call_sid, "media_format": {"encoding": "PCMU"}}
        await socket.send_to(
            text_data=json.dumps({"event": "start", "stream_id": "S9", "start": start})
        )
        first = await socket.receive_output(10)
        if query == "token=st_forged":
            assert first["type"] == "websocket.close"
            await socket.disconnect()
    media = [json.loads(first["text"])]
    while media[-1].get("event") != "mark" or media[-1]["mark"]["name"] != "reply-end":
        media.append(json.loads((await socket.receive_output(10))["text"]))
    heard = [m for m in media if m["event"] == "media"]
    assert heard and all(m["stream_id"] == "S9" for m in heard)
    await socket.send_to(text_data=json.dumps({"event": "stop", "stream_id": "S9"}))
    await socket.disconnect()
    assert (await ended_call(pk=call.pk)).session_id


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("no_leases")
async def test_the_agent_ending_a_dialled_telnyx_call_hangs_it_up_at_telnyx(
    owner_api: Any, telnyx: FakeTelnyxRest, line: PhoneNumber, llm: Any
) -> None:
    """A Call Control call stays up when its media stream closes: ``end_call`` sends the
    ``hangup`` command once the last words were heard, then closes the stream."""
    end_call = {"name": "end_call", "client": True, "description": "Hang up"}
    await sync_to_async(agent_services.agent_update)(agent=line.agent, tools=[end_call])
    assert (await sync_to_async(_call)(owner_api)).status_code == 201
    (dial,) = telnyx.dials()
    stream = urlsplit(dial.body["stream_url"])
    call = await sync_to_async(PhoneCall.objects.get)()
    socket = WebsocketCommunicator(application, f"{stream.path}?{stream.query}")
    assert (await socket.connect(timeout=10))[0]
    start = {"call_control_id": call.call_sid, "media_format": {"encoding": "PCMU"}}
    started = {"event": "start", "stream_id": "S9", "start": start}
    await socket.send_to(text_data=json.dumps(started))
    llm.script(*tool_call(0, "call_1", "end_call", "{}"), Finish("tool_calls"), Done())
    llm.script(*text_reply("Goodbye."))
    await socket.send_to(text_data=json.dumps({"event": "dtmf", "dtmf": {"digit": "#"}}))
    while True:  # the goodbye, then the mark after it: played, as the carrier says
        output = await socket.receive_output(20)
        assert output["type"] != "websocket.close", "closed before the goodbye was heard"
        message = json.loads(output["text"])
        if message["event"] == "mark" and message["mark"]["name"] == "call-end":
            break
    assert not [c for c, _ in telnyx.commands() if c == "hangup"]  # not before it was heard
    await socket.send_to(text_data=json.dumps({"event": "mark", "mark": {"name": "call-end"}}))
    assert (await socket.receive_output(20))["type"] == "websocket.close"
    await socket.disconnect()
    assert [c for c, _ in telnyx.commands()].count("hangup") == 1
