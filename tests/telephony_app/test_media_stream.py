"""The media-stream door over the real ASGI app (in-process, fake speech): a stream must
present its call's token, Telnyx's dialect hears the greeting, keypad digits reach the LLM
and a browser tool is refused with words the LLM reads."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from typing import Any

import numpy as np
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client as DjangoClient

from engine.doors.audio import pcm_to_ulaw
from platform_site.asgi import application
from sessions_app import recordings
from sessions_app import services as agent_services
from sessions_app.models import Recording, Session
from telephony_app import links
from telephony_app.models import PhoneCall
from tests.engine.providers.llm.openai.fake_server import Done, Finish, text_reply, tool_call
from tests.factories import Tenant, phone_line
from tests.sessions_app.conftest import no_leases  # noqa: F401  (a fixture)
from tests.sessions_app.recording import eventually
from tests.telephony_app.calls import ended_call
from tests.telephony_app.carrier import telnyx_call_answered, twilio_post, twilio_voice_form

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_leases")]
PUBLIC = "https://voice.example.com"
SILENCE = base64.b64encode(b"\xff" * 160).decode()


@pytest.fixture(autouse=True)
def public(settings: Any) -> None:
    settings.PUBLIC_URL = PUBLIC


def _token(markup: str) -> str:
    found = re.search(r'<Parameter name="token" value="([^"]+)"', markup)
    assert found is not None, markup
    return found[1]


async def _stream(carrier: str) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(application, f"/phone/{carrier}/stream")
    connected, _ = await socket.connect(timeout=10)
    assert connected
    return socket


async def started_call(phone: Any, call_sid: str, stream_sid: str) -> WebsocketCommunicator:
    """A Twilio call to ``phone`` answered (the signed webhook) and its stream started."""
    url = links.voice_webhook_url(phone, PUBLIC)
    answered = await sync_to_async(twilio_post)(DjangoClient(), url, twilio_voice_form(call_sid))
    socket = await _stream("twilio")
    start = {
        "callSid": call_sid, "streamSid": stream_sid,
        "customParameters": {"token": _token(answered.content.decode())},
    }  # fmt: skip
    await socket.send_to(text_data=json.dumps({"event": "start", "start": start}))
    return socket


async def _until_reply_end(socket: WebsocketCommunicator, timeout: float = 10) -> list:
    """The carrier's messages up to the mark that follows a whole reply (``tts_done``)."""
    seen = []
    while True:
        output = await socket.receive_output(timeout)
        if output["type"] == "websocket.close":
            raise AssertionError(f"closed before the reply ended: {seen}")
        message = json.loads(output["text"])
        seen.append(message)
        if message["event"] == "mark" and message["mark"]["name"] == "reply-end":
            return seen


async def test_a_stream_must_carry_its_calls_token(owner: Tenant) -> None:
    await sync_to_async(agent_services.agent_create)(
        workspace=owner.workspace, name="Support", slug="support", greeting="Hello."
    )
    _, phone = await sync_to_async(phone_line)(owner.workspace, "support")
    url = links.voice_webhook_url(phone, PUBLIC)
    answered = await sync_to_async(twilio_post)(DjangoClient(), url, twilio_voice_form("CA7"))
    token = _token(answered.content.decode())
    for call_sid, presented in (("CA7", "st_forged"), ("CA8", token), ("CA7", "")):
        socket = await _stream("twilio")
        start = {"callSid": call_sid, "streamSid": "MZ1", "customParameters": {"token": presented}}
        await socket.send_to(text_data=json.dumps({"event": "connected"}))
        await socket.send_to(text_data=json.dumps({"event": "start", "start": start}))
        assert (await socket.receive_output(10))["type"] == "websocket.close"
        await socket.disconnect()
    assert not await sync_to_async(Session.objects.exists)()


async def test_a_telnyx_call_hears_the_greeting_and_cannot_use_browser_tools(
    owner: Tenant, llm: Any
) -> None:
    browser_tool = {"name": "open_page", "description": "Open a page", "client": True}
    await sync_to_async(agent_services.agent_create)(
        workspace=owner.workspace, name="Support", slug="support",
        greeting="Hello from Telnyx.", tools=[browser_tool],
    )  # fmt: skip
    answered = await sync_to_async(telnyx_call_answered)(
        owner.workspace, agent="support", call_id="v3:call", public_url=PUBLIC
    )
    socket = await _stream("telnyx")
    await socket.send_to(text_data=json.dumps({"event": "connected", "version": "1.0.0"}))
    token = _token(answered)
    start = {
        "call_control_id": "v3:call", "custom_parameters": {"token": token},
        "media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 1},
    }  # fmt: skip
    await socket.send_to(
        text_data=json.dumps({"event": "start", "stream_id": "S1", "start": start})
    )
    heard = await _until_reply_end(socket)
    media = [m for m in heard if m["event"] == "media"]
    assert media and all(m["stream_id"] == "S1" for m in media)
    assert sum(len(base64.b64decode(m["media"]["payload"])) for m in media) > 160

    llm.script(*tool_call(0, "call_1", "open_page", "{}"), Finish("tool_calls"), Done())
    llm.script(*text_reply("I cannot open pages on the phone."))
    for digit in "42#":
        await socket.send_to(text_data=json.dumps({"event": "dtmf", "dtmf": {"digit": digit}}))
    await _until_reply_end(socket)  # the reply, spoken
    assert "keypad: 42#" in llm.requests[0].json["messages"][-1]["content"]
    refused = [m for m in llm.requests[1].json["messages"] if m["role"] == "tool"]
    assert "cannot run during a phone call" in refused[0]["content"]
    await socket.send_to(text_data=json.dumps({"event": "stop", "stream_id": "S1"}))
    await socket.disconnect()


async def test_end_call_and_send_dtmf_are_the_phones_own_tools(owner: Tenant, llm: Any) -> None:
    phone_tools = [
        {"name": "end_call", "description": "Hang up", "client": True},
        {"name": "send_dtmf", "description": "Press keys", "client": True,
         "parameters": {"digits": "string"}},
    ]  # fmt: skip
    await sync_to_async(agent_services.agent_create)(
        workspace=owner.workspace, name="Support", slug="support", tools=phone_tools
    )
    _, phone = await sync_to_async(phone_line)(owner.workspace, "support")
    socket = await started_call(phone, "CA9", "MZ9")
    llm.script(
        *tool_call(0, "call_1", "send_dtmf", '{"digits": "12"}'),
        *tool_call(1, "call_2", "end_call", "{}"),
        Finish("tool_calls"),
        Done(),
    )
    llm.script(*text_reply("Goodbye."))
    await socket.send_to(text_data=json.dumps({"event": "dtmf", "dtmf": {"digit": "#"}}))
    seen = []
    while not any(m.get("mark", {}).get("name") == "call-end" for m in seen):
        output = await socket.receive_output(10)
        assert output["type"] == "websocket.send", seen
        seen.append(json.loads(output["text"]))
    results = {m["tool_call_id"]: m["content"] for m in llm.requests[1].json["messages"]
               if m["role"] == "tool"}  # fmt: skip
    assert '"sent": "12"' in results["call_1"] and '"ok": true' in results["call_2"]
    tones = base64.b64decode(next(m for m in seen if m["event"] == "media")["media"]["payload"])
    assert len(tones) == int(0.32 * 8000)  # two keys of 100 ms, each followed by 60 ms
    # The carrier echoes the last mark once it has played everything: the call ends.
    await socket.send_to(text_data=json.dumps({"event": "mark", "mark": {"name": "call-end"}}))
    assert (await socket.receive_output(10))["type"] == "websocket.close"
    await socket.disconnect()
    assert (await ended_call()).session_id


async def test_hostile_frames_on_many_streams_at_once_start_nothing(owner: Tenant) -> None:
    garbage = [
        "not json", "[]", "null", '{"event": ["media"]}', '{"event": "media", "media": []}',
        '{"event": "mark", "mark": "x"}', '{"event": "dtmf", "dtmf": {"digit": {}}}',
        '{"event": "start", "start": []}', "x" * 100_000,
        '{"event": "start", "start": {"callSid": {}, "customParameters": {"token": ["st_"]}}}',
    ]  # fmt: skip

    async def hostile() -> str:
        socket = await _stream("twilio")
        for frame in garbage:
            await socket.send_to(text_data=frame)
        output = await socket.receive_output(10)
        await socket.disconnect()
        return str(output["type"])

    closes = await asyncio.gather(*(hostile() for _ in range(6)))
    assert closes == ["websocket.close"] * 6
    assert not await sync_to_async(Session.objects.exists)()


async def _live_call(owner: Tenant, call_sid: str) -> tuple[WebsocketCommunicator, str]:
    """A Twilio call answered and its stream started (the greeting's first frame heard)."""
    await sync_to_async(agent_services.agent_create)(
        workspace=owner.workspace, name="Support", slug="support", greeting="Hello."
    )
    _, phone = await sync_to_async(phone_line)(owner.workspace, "support")
    url = links.voice_webhook_url(phone, PUBLIC)
    answered = await sync_to_async(twilio_post)(DjangoClient(), url, twilio_voice_form(call_sid))
    token = _token(answered.content.decode())
    socket = await _stream("twilio")
    start = {"callSid": call_sid, "streamSid": "MZ1", "customParameters": {"token": token}}
    await socket.send_to(text_data=json.dumps({"event": "start", "start": start}))
    assert (await socket.receive_output(10))["type"] == "websocket.send"
    return socket, token


async def test_a_calls_token_opens_one_stream_only(owner: Tenant, llm: Any) -> None:
    """A second stream presenting a live call's token gets nothing, and its closing does
    not end the call's record (the token is claimed by the first stream)."""
    first, token = await _live_call(owner, "CA5")
    second = await _stream("twilio")
    start = {"callSid": "CA5", "streamSid": "MZ2", "customParameters": {"token": token}}
    await second.send_to(text_data=json.dumps({"event": "start", "start": start}))
    assert (await second.receive_output(10))["type"] == "websocket.close"
    await second.disconnect()
    call = await sync_to_async(PhoneCall.objects.get)(call_sid="CA5")
    assert call.ended_at is None and call.status == "in-progress"
    await first.disconnect()


async def test_a_frame_nested_past_the_parsers_depth_is_dropped(owner: Tenant, llm: Any) -> None:
    socket, _ = await _live_call(owner, "CA6")
    await socket.send_to(text_data="[" * 100_000 + "]" * 100_000)
    await socket.send_to(text_data=json.dumps({"event": "stop"}))
    while (await socket.receive_output(10))["type"] != "websocket.close":
        pass  # the greeting's frames, then the close the stop asked for
    await socket.disconnect()
    await ended_call(call_sid="CA6")


async def test_a_flood_of_frames_closes_the_stream_and_ends_the_call(
    owner: Tenant, llm: Any
) -> None:
    """Bytes are counted as they arrive, as on the browser's socket: far more than a call's
    audio closes the stream with 4029 before the frames are buffered."""
    socket, _ = await _live_call(owner, "CA9")
    junk = json.dumps({"event": "media", "media": {"payload": "A" * 400_000}})
    for _ in range(10):
        await socket.send_to(text_data=junk)
    while (output := await socket.receive_output(10))["type"] != "websocket.close":
        pass  # the greeting's frames
    assert output["code"] == 4029
    await socket.disconnect()
    await ended_call(call_sid="CA9")


async def test_a_flood_of_tiny_frames_closes_the_stream_and_ends_the_call(
    owner: Tenant, llm: Any
) -> None:
    """Messages are counted as they arrive too: frames the door would drop unread (``{}``)
    still cost the process, and thousands of them at once close the stream with 4029. A
    call's 20 ms frames are 50 a second, under the 100 a second allowed."""
    socket, _ = await _live_call(owner, "CA10")
    for _ in range(3_000):
        await socket.send_to(text_data="{}")
    while (output := await socket.receive_output(10))["type"] != "websocket.close":
        pass  # the greeting's frames
    assert output["code"] == 4029
    await socket.disconnect()
    await ended_call(call_sid="CA10")


async def test_a_recorded_call_keeps_the_callers_and_the_agents_audio(
    owner: Tenant, llm: Any, settings: Any, tmp_path: Any
) -> None:
    """The phone door records through the same seam as the browser's: the caller's μ-law
    decoded (left), the agent's voice before it was encoded for the carrier (right)."""
    settings.STORAGES = {
        **settings.STORAGES,
        "recordings": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path)},
        },
    }
    await sync_to_async(agent_services.agent_create)(
        workspace=owner.workspace, name="Support", slug="support", greeting="Hello, caller.",
        record_audio=True,
    )  # fmt: skip
    _, phone = await sync_to_async(phone_line)(owner.workspace, "support")
    socket = await started_call(phone, "CA9", "MZ9")
    await _until_reply_end(socket)  # the greeting, sent
    tone = (np.sin(np.arange(8_000) * 2 * np.pi * 440 / 8_000) * 12_000).astype("<i2")
    ulaw = pcm_to_ulaw(tone.tobytes())
    for at in range(0, len(ulaw), 160):  # one second, in 20 ms frames
        payload = base64.b64encode(ulaw[at : at + 160]).decode()
        await socket.send_to(
            text_data=json.dumps({"event": "media", "media": {"payload": payload}})
        )
    await socket.send_to(text_data=json.dumps({"event": "stop", "streamSid": "MZ9"}))
    await socket.disconnect()
    recording = await eventually(lambda: Recording.objects.select_related("session").first())
    wav = await sync_to_async(lambda: b"".join(recordings.recording_open(recording=recording)))()
    frames = np.frombuffer(wav[44:], dtype="<i2").reshape(-1, 2)
    caller, agent = frames[:, 0], frames[:, 1]
    # The second of tone (a sine is above 1/12 of its peak 95 % of the time).
    assert 0.85 * 16_000 < np.count_nonzero(np.abs(caller) > 1_000) <= 16_000
    assert np.abs(agent).max() > 1_000  # the greeting
    assert b"RIFF" not in b"".join(path.read_bytes() for path in tmp_path.rglob("*.sealed"))
