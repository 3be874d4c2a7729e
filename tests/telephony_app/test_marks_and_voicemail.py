"""What the caller heard, by the carrier's marks, and the voicemail message in the agent's
own voice; over the real ASGI app (in-process, scripted speech: the fake voice speaks
10 ms a character, so a sentence of about 100 characters is about a second of audio).

- A carrier that echoes marks late (the caller heard less than the session's own clock
  says): after a barge-in the agent's history holds only the sentence whose marks came
  back, not the ones the clock thinks were heard.
- An outbound Twilio call with ``leave_message``: once the stream is up, Twilio's
  AsyncAmd callback (``machine_end_beep``) has the session say the voicemail message on
  the stream as μ-law (no TwiML ``<Say>``), recorded as the agent's; the call hangs up
  once the mark after it comes back.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client as DjangoClient

from engine.doors.audio import pcm_to_ulaw
from sessions_app import services as agent_services
from sessions_app.models import Session
from tests.engine.providers.fake import silence_pcm, tone_pcm
from tests.engine.providers.llm.openai.fake_server import text_reply
from tests.factories import TWILIO_SID, TWILIO_TOKEN, Tenant, phone_line
from tests.fakes.twilio_rest import FakeTwilioRest
from tests.sessions_app.conftest import no_leases  # noqa: F401  (a fixture)
from tests.telephony_app.calls import ended_call
from tests.telephony_app.carrier import twilio_post
from tests.telephony_app.test_media_stream import _stream, started_call

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_leases")]
PUBLIC = "https://voice.example.com"
FIRST = "The first sentence is about the weather today and it goes on for quite a while here."
SECOND = "The second sentence is about the traffic on the way home and it is rather long too."
THIRD = "The third sentence says what to do about all of that and then it finally stops here."
MESSAGE = "Hi, this is Acme about your order. Please call us back."


@pytest.fixture(autouse=True)
def public(settings: Any) -> None:
    settings.PUBLIC_URL = PUBLIC


def _frames(pcm8k: bytes) -> list[str]:
    """8 kHz PCM as the carrier's ``media`` frames (20 ms of μ-law each)."""
    ulaw = pcm_to_ulaw(pcm8k)
    return [
        json.dumps(
            {"event": "media", "media": {"payload": base64.b64encode(ulaw[i : i + 160]).decode()}}
        )
        for i in range(0, len(ulaw), 160)
    ]


async def _receive(socket: WebsocketCommunicator) -> dict[str, Any] | None:
    output = await socket.receive_output(10)
    return json.loads(output["text"]) if output["type"] == "websocket.send" else None


async def test_the_history_keeps_what_the_carriers_marks_say_was_heard(
    owner: Tenant, llm: Any
) -> None:
    await sync_to_async(agent_services.agent_create)(
        workspace=owner.workspace, name="Support", slug="support"
    )
    _, phone = await sync_to_async(phone_line)(owner.workspace, "support")
    socket = await started_call(phone, "CA21", "MZ21")
    llm.script(*text_reply(f"{FIRST} {SECOND} {THIRD}"))
    llm.script(*text_reply("Yes?"))
    await socket.send_to(text_data=json.dumps({"event": "dtmf", "dtmf": {"digit": "#"}}))

    # The whole reply arrives at once (faster than it plays); this carrier has played only
    # the first half of the first sentence so far, and echoes only those marks.
    first_media_at, echoed, media_ms = None, 0, 0.0
    while True:
        message = await _receive(socket)
        assert message is not None
        if message["event"] == "media":
            first_media_at = first_media_at or time.monotonic()
            media_ms += len(base64.b64decode(message["media"]["payload"])) / 8
        elif message["event"] == "mark":
            name = message["mark"]["name"]
            if name == "reply-end":
                break
            if float(name.rsplit(":", 1)[1]) <= 400:
                await socket.send_to(
                    text_data=json.dumps({"event": "mark", "mark": {"name": name}})
                )
                echoed += 1
    assert echoed and media_ms > 2000  # three sentences of over 800 ms each
    # By the session's clock, the first sentence and part of the second have played.
    assert first_media_at is not None
    await asyncio.sleep(max(0.0, first_media_at + 1.4 - time.monotonic()))
    for frame in _frames(tone_pcm(300, sample_rate=8000, amplitude=8000)):
        await socket.send_to(text_data=frame)
    while (message := await _receive(socket)) is not None and message["event"] != "clear":
        pass
    assert (
        message is not None and message["event"] == "clear"
    )  # barge-in: the carrier drops the rest
    for frame in _frames(silence_pcm(700, sample_rate=8000)):
        await socket.send_to(text_data=frame)
    for _ in range(200):
        if len(llm.requests) >= 2:
            break
        await asyncio.sleep(0.05)
    history = llm.requests[1].json["messages"]
    assert history[-1] == {"role": "user", "content": "hello"}
    assert history[-2] == {"role": "assistant", "content": f"{FIRST} [interrupted]"}
    await socket.send_to(text_data=json.dumps({"event": "stop"}))
    await socket.disconnect()


async def test_the_voicemail_message_is_said_in_the_agents_voice_then_the_call_ends(
    owner: Tenant, owner_api: Any, llm: Any, settings: Any
) -> None:
    await sync_to_async(agent_services.agent_create)(
        workspace=owner.workspace, name="Sales", slug="sales", greeting="Hello there."
    )
    _, phone = await sync_to_async(phone_line)(owner.workspace, "sales")
    with FakeTwilioRest(auth_token=TWILIO_TOKEN) as twilio:
        settings.TWILIO_API_URL, settings.DEV_ALLOW_PRIVATE_EGRESS = twilio.url, True
        body = {"machine_detection": "leave_message", "voicemail_message": MESSAGE}
        saved = await sync_to_async(owner_api.put)(
            "/api/v1/agents/sales/call-settings", body, format="json"
        )
        assert saved.status_code == 200
        placed = await sync_to_async(owner_api.post)(
            "/api/v1/calls", {"from": "+14155550100", "to": "+12125550123"}, format="json"
        )
        assert placed.status_code == 201, placed.content
        call_sid = placed.json()["call_sid"]
        (request,) = twilio.requests
        token = re.search(r'name="token" value="(st_[^"]+)"', request.value("Twiml"))
        assert token is not None

        socket = await _stream("twilio")
        start = {"callSid": call_sid, "streamSid": "MZ31", "customParameters": {"token": token[1]}}
        await socket.send_to(text_data=json.dumps({"event": "start", "start": start}))
        greeting_ulaw = 0
        while (message := await _receive(socket)) is not None:
            if message["event"] == "media":
                greeting_ulaw += len(base64.b64decode(message["media"]["payload"]))
            if message["event"] == "mark" and message["mark"]["name"] == "reply-end":
                break
        assert greeting_ulaw  # the machine heard the agent's greeting

        # The machine's beep: Twilio's AsyncAmd callback, signed.
        amd = {"AccountSid": TWILIO_SID, "CallSid": call_sid, "AnsweredBy": "machine_end_beep"}
        amd_url = f"{PUBLIC}/phone/twilio/{phone.uid}/machine"
        answer = await sync_to_async(twilio_post)(DjangoClient(), amd_url, amd)
        assert answer.status_code == 204
        message_ulaw, last_mark = bytearray(), None
        while (message := await _receive(socket)) is not None:
            if message["event"] == "media":
                message_ulaw += base64.b64decode(message["media"]["payload"])
            if message["event"] == "mark":
                last_mark = message["mark"]["name"]
                if last_mark in ("call-end", "reply-end"):
                    break
        assert last_mark == "call-end"
        # The message, spoken by the agent's voice on the stream (10 ms a character).
        assert len(message_ulaw) / 8 >= len(MESSAGE) * 10 * 0.9
        assert not twilio.updates()  # no <Say> asked of the carrier
        # The carrier echoes the last mark once it has played the message: hang up.
        await socket.send_to(text_data=json.dumps({"event": "mark", "mark": {"name": "call-end"}}))
        assert (await socket.receive_output(10))["type"] == "websocket.close"
        await socket.disconnect()

    call = await ended_call(call_sid=call_sid)
    assert [entry["step"] for entry in call.statuses if "step" in entry] == ["voicemail"]
    session = await sync_to_async(Session.objects.get)()
    said: list[tuple[str, str]] = []
    for _ in range(100):  # the record is written off the event loop
        said = await sync_to_async(lambda: list(session.transcript.values_list("role", "text")))()
        if ("assistant", MESSAGE) in said:
            break
        await asyncio.sleep(0.05)
    assert said[:1] == [("assistant", "Hello there.")] and ("assistant", MESSAGE) in said
