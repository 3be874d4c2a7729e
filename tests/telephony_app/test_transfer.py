"""``transfer_call`` (the ``system`` tool kind) on a live call, through fakes of the
carriers' REST APIs: Twilio's call is updated with TwiML that dials the destination,
Telnyx's gets its Call Control ``transfer`` command; the LLM is offered only the
destinations the agent allows, a destination it was not offered never reaches the
carrier, and a carrier's refusal reaches the LLM in fixed words. A browser session of the
same agent gets no system tool: its ``transfer_call`` stays the page's own tool."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client as DjangoClient

from platform_site.asgi import application
from sessions_app import services as agent_services
from telephony_app import links
from tests.engine.providers.llm.openai.fake_server import Done, Finish, text_reply, tool_call
from tests.factories import TWILIO_SID, TWILIO_TOKEN, Tenant, phone_line
from tests.fakes.telnyx_rest import FakeTelnyxRest
from tests.fakes.twilio_rest import FakeTwilioRest
from tests.sessions_app.conftest import no_leases  # noqa: F401  (a fixture)
from tests.sessions_app.wsclient import Client as WsClient
from tests.telephony_app.carrier import telnyx_call_answered, twilio_post, twilio_voice_form

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_leases")]
PUBLIC = "https://voice.example.com"
DESK = "+14155550199"
SIP_DESK = "sip:desk@support.example.com"
TELNYX_KEY = "KEY_transfer_test"
TRANSFER = {
    "name": "transfer_call", "client": True,
    "description": "Transfer to a person when the caller asks for one.",
    "parameters": {"to": {"type": "string", "enum": [DESK, SIP_DESK]}},
}  # fmt: skip


@pytest.fixture(autouse=True)
def public(settings: Any) -> None:
    settings.PUBLIC_URL = PUBLIC
    settings.DEV_ALLOW_PRIVATE_EGRESS = True


@pytest.fixture
def twilio(settings: Any) -> Iterator[FakeTwilioRest]:
    with FakeTwilioRest() as fake:
        settings.TWILIO_API_URL = fake.url
        yield fake


@pytest.fixture
def telnyx(settings: Any) -> Iterator[FakeTelnyxRest]:
    with FakeTelnyxRest(api_key=TELNYX_KEY) as fake:
        settings.TELNYX_API_URL = fake.url
        yield fake


def _token(markup: str) -> str:
    found = re.search(r'<Parameter name="token" value="([^"]+)"', markup)
    assert found is not None, markup
    return found[1]


async def _twilio_call(owner: Tenant, call_sid: str) -> WebsocketCommunicator:
    await sync_to_async(agent_services.agent_create)(
        workspace=owner.workspace, name="Support", slug="support", tools=[TRANSFER]
    )
    _, phone = await sync_to_async(phone_line)(owner.workspace, "support")
    url = links.voice_webhook_url(phone, PUBLIC)
    answered = await sync_to_async(twilio_post)(DjangoClient(), url, twilio_voice_form(call_sid))
    socket = WebsocketCommunicator(application, "/phone/twilio/stream")
    assert (await socket.connect(timeout=10))[0]
    token = _token(answered.content.decode())
    start = {"callSid": call_sid, "streamSid": "MZ1", "customParameters": {"token": token}}
    await socket.send_to(text_data=json.dumps({"event": "start", "start": start}))
    return socket


async def _press_hash(socket: WebsocketCommunicator) -> None:
    """A keypad ``#``: a user turn at once (the LLM's script decides what happens)."""
    await socket.send_to(text_data=json.dumps({"event": "dtmf", "dtmf": {"digit": "#"}}))


async def _until_reply_end(socket: WebsocketCommunicator) -> None:
    while True:
        output = await socket.receive_output(10)
        assert output["type"] == "websocket.send", output
        message = json.loads(output["text"])
        if message["event"] == "mark" and message["mark"]["name"] == "reply-end":
            return


def _llm_transfers(llm: Any, arguments: str, *, then_says: str | None = None) -> None:
    """The LLM's next turn calls ``transfer_call`` with ``arguments``, then says something."""
    llm.script(*tool_call(0, "call_1", "transfer_call", arguments), Finish("tool_calls"), Done())
    if then_says is not None:
        llm.script(*text_reply(then_says))


def _tool_results(request: Any) -> dict[str, str]:
    return {
        m["tool_call_id"]: m["content"] for m in request.json["messages"] if m["role"] == "tool"
    }


async def test_a_twilio_call_is_transferred_to_a_number_the_agent_allows(
    owner: Tenant, llm: Any, twilio: FakeTwilioRest
) -> None:
    socket = await _twilio_call(owner, "CA1001" + "0" * 28)
    _llm_transfers(llm, json.dumps({"to": DESK}), then_says="Connecting you now.")
    await _press_hash(socket)
    await _until_reply_end(socket)
    offered = {t["function"]["name"]: t["function"] for t in llm.requests[0].json["tools"]}
    assert offered["transfer_call"]["parameters"]["properties"]["to"]["enum"] == [DESK, SIP_DESK]
    (sent,) = twilio.requests
    assert sent.path == f"/2010-04-01/Accounts/{TWILIO_SID}/Calls/CA1001{'0' * 28}.json"
    assert (sent.account, sent.token) == (TWILIO_SID, TWILIO_TOKEN)
    assert f"<Dial>{DESK}</Dial>" in sent.value("Twiml")
    assert '"transferred": true' in _tool_results(llm.requests[1])["call_1"]
    await socket.disconnect()


async def test_a_sip_transfer_dials_the_uri_and_a_refusal_reaches_the_llm_in_fixed_words(
    owner: Tenant, llm: Any, twilio: FakeTwilioRest
) -> None:
    twilio.fail_with = 400  # Twilio: "Call is not in-progress"
    socket = await _twilio_call(owner, "CA1002" + "0" * 28)
    _llm_transfers(llm, json.dumps({"to": SIP_DESK}), then_says="Sorry, that did not work.")
    await _press_hash(socket)
    await _until_reply_end(socket)
    (sent,) = twilio.requests
    assert f"<Dial><Sip>{SIP_DESK}</Sip></Dial>" in sent.value("Twiml")
    result = _tool_results(llm.requests[1])["call_1"]
    assert "refused the transfer" in result and "in-progress" not in result
    await socket.disconnect()


async def test_a_destination_the_agent_does_not_allow_never_reaches_the_carrier(
    owner: Tenant, llm: Any, twilio: FakeTwilioRest
) -> None:
    socket = await _twilio_call(owner, "CA1003" + "0" * 28)
    _llm_transfers(llm, '{"to": "+19005550100"}', then_says="I cannot transfer you there.")
    await _press_hash(socket)
    await _until_reply_end(socket)
    assert "invalid arguments" in _tool_results(llm.requests[1])["call_1"]
    assert twilio.requests == []
    await socket.disconnect()


async def test_a_telnyx_call_is_transferred_with_its_call_control_command(
    owner: Tenant, llm: Any, telnyx: FakeTelnyxRest
) -> None:
    await sync_to_async(agent_services.agent_create)(
        workspace=owner.workspace, name="Support", slug="support", tools=[TRANSFER]
    )
    answered = await sync_to_async(telnyx_call_answered)(
        owner.workspace, agent="support", call_id="v3:abc", public_url=PUBLIC, api_key=TELNYX_KEY
    )
    socket = WebsocketCommunicator(application, "/phone/telnyx/stream")
    assert (await socket.connect(timeout=10))[0]
    start = {"call_control_id": "v3:abc",
             "custom_parameters": {"token": _token(answered)}}  # fmt: skip
    await socket.send_to(
        text_data=json.dumps({"event": "start", "stream_id": "S1", "start": start})
    )
    _llm_transfers(llm, json.dumps({"to": DESK}), then_says="Connecting you now.")
    await _press_hash(socket)
    await _until_reply_end(socket)
    (sent,) = telnyx.requests
    assert (sent.call_control_id, sent.command) == ("v3:abc", "transfer")
    assert (sent.api_key, sent.body) == (TELNYX_KEY, {"to": DESK})
    await socket.disconnect()


async def test_a_browser_session_gets_no_system_tool(owner: Tenant, llm: Any) -> None:
    await sync_to_async(agent_services.agent_create)(
        workspace=owner.workspace, name="Support", slug="support", tools=[TRANSFER]
    )
    _llm_transfers(llm, json.dumps({"to": DESK}))
    async with WsClient(f"/v1/session?key={owner.publishable_key}&agent=support") as page:
        await page.send({"type": "configure", "mode": "text"})
        await page.until("ready")
        await page.send({"type": "text", "text": "a person, please"})
        # The page's own tool, as before: a system tool would never reach the page.
        call = await page.until("tool_call")
        assert (call["name"], call["arguments"]) == ("transfer_call", {"to": DESK})
