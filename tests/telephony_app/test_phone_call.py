"""A whole phone call through a real daphne, with a fake carrier that speaks Twilio Media
Streams: the signed voice webhook, the stream, the greeting heard as μ-law, a question
spoken as μ-law (espeak-ng, sox; the offline recogniser), a server tool in the sandbox,
the answer, a barge-in (``clear``), keypad digits, ``end_call``; then the session record,
its usage, the call's minutes, the ``session.ended`` webhook with the caller's number,
and logs that mask it.

The platform runs on its embedded defaults (SQLite, in-memory channel layer, sandbox
worker processes, offline Whisper and Piper) in a subprocess, like the browser tests.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.engine.providers.llm.openai.fake_server import (
    Done,
    FakeOpenAIServer,
    Finish,
    text_reply,
    tool_call,
)
from tests.factories import TWILIO_SID, TWILIO_TOKEN, order_tool
from tests.fakes.egress_server import EgressTestServer, respond
from tests.fakes.twilio_media import FakeTwilioCall, loudness, spoken_ulaw
from tests.speech import SPOKEN, words
from tests.telephony_app.platform import Platform, running_platform

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
CALLER = "+447700900123"
LONG_ANSWER = (
    "Order forty two has shipped. It left our warehouse this morning and it should reach "
    "you within two or three working days. The courier will text you a delivery window "
    "on the day. Is there anything else I can help you with today?"
)


@pytest.fixture
async def hooks() -> AsyncIterator[EgressTestServer]:
    server = EgressTestServer()
    await server.__aenter__()
    server.route("/hooks", respond(200, b"ok"))
    yield server
    await server.__aexit__(None, None, None)


@pytest.fixture
def platform(tmp_path: Path, llm: FakeOpenAIServer, hooks: EgressTestServer) -> Iterator[Platform]:
    with running_platform(
        tmp_path, LLM_BASE_URL=llm.base_url, LLM_API_KEY="phone-test-llm-key",
        EGRESS_PORTS=f"80,443,{hooks.port}",
        # A first attempt that timed out on a loaded machine is tried again in seconds.
        WEBHOOK_RETRY_BASE_S="1", WEBHOOK_TIMEOUT_S="15",
    ) as platform:  # fmt: skip
        yield platform


async def _until(check: Any, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def _settled(llm: FakeOpenAIServer, quiet_s: float = 3.0) -> None:
    """Until the LLM has had no new request for ``quiet_s`` (the caller's last words may
    have made one turn or two)."""
    count, since = len(llm.requests), time.monotonic()
    while time.monotonic() - since < quiet_s:
        await asyncio.sleep(0.1)
        if len(llm.requests) != count:
            count, since = len(llm.requests), time.monotonic()


def _user_texts(llm: FakeOpenAIServer) -> list[str]:
    return [
        str(m.get("content"))
        for request in llm.requests
        for m in request.json["messages"][-1:]
        if m.get("role") == "user"
    ]


async def test_a_whole_call(
    platform: Platform, llm: FakeOpenAIServer, hooks: EgressTestServer
) -> None:
    platform.api("POST", "agents", {
        "name": "Orders", "slug": "orders",
        "instructions": "You answer questions about orders on the phone.",
        "greeting": "Hello, this is the order line. How can I help?",
        "tools": [order_tool(), {"name": "end_call", "client": True,
                                 "description": "Hang up when the caller is done"}],
    })  # fmt: skip
    platform.api("POST", "carrier-accounts", {
        "carrier": "twilio", "name": "Main", "account_sid": TWILIO_SID, "credential": TWILIO_TOKEN,
    })  # fmt: skip
    number = platform.api(
        "POST", "phone-numbers", {"account": "Main", "number": "+14155550100", "agent": "orders"}
    )
    platform.manage("shell", "-c", (
        "from secrets_app.models import Workspace; from webhooks_app.services import "
        "endpoint_create; endpoint_create(workspace=Workspace.objects.get(name='Phone'), "
        f"url='{hooks.url('/hooks')}', events=['session.ended'])"
    ))  # fmt: skip
    question = await asyncio.to_thread(spoken_ulaw, SPOKEN)
    interruption = await asyncio.to_thread(spoken_ulaw, "Wait, wait. Stop please.")
    llm.script(*tool_call(0, "call_1", "track_order", '{"order_number": "42"}'),
               Finish("tool_calls"), Done())  # fmt: skip
    llm.script(*text_reply(LONG_ANSWER))

    # A forged webhook starts nothing; the real one answers with the stream.
    forged = await asyncio.to_thread(
        httpx.post, number["voice_webhook_url"], data={"CallSid": "CAforged"}, timeout=30
    )
    assert forged.status_code == 403
    twiml = await asyncio.to_thread(
        platform.answer_call, number["voice_webhook_url"], "CA" + "1" * 32, CALLER
    )
    stream = re.search(r'<Stream url="([^"]+)">', twiml)
    token = re.search(r'<Parameter name="token" value="([^"]+)"', twiml)
    assert (
        stream
        and token
        and stream[1] == platform.url.replace("http", "ws") + "/phone/twilio/stream"
    )

    async with FakeTwilioCall(
        stream[1], call_sid="CA" + "1" * 32, parameters={"token": token[1]}
    ) as call:
        # The greeting, heard as μ-law at 8 kHz.
        await _until(lambda: len(call.heard) >= 8000, timeout=120, what="the greeting")
        await _until(lambda: not call.playing, timeout=60, what="the greeting to be played")
        greeting = bytes(call.heard)
        assert len(greeting) > 8000 * 1.5 and loudness(greeting) > 1000
        # The question, spoken; the tool runs in the sandbox; the answer is spoken back.
        call.say(question, then_silence_s=1.5)
        await _until(lambda: len(llm.requests) >= 2, timeout=120, what="the tool round")
        # Phone audio costs the small offline recogniser accuracy: some words, not all.
        assert set(words(_user_texts(llm)[0])) & {"weather", "paris"}, _user_texts(llm)[0]
        tool_results = [m for m in llm.requests[1].json["messages"] if m.get("role") == "tool"]
        assert tool_results and "shipped" in tool_results[0]["content"]
        answered_from = len(call.of_event("media"))
        await _until(
            lambda: len(call.of_event("media")) > answered_from + 5, timeout=60, what="the answer"
        )
        # The caller talks over the answer: the platform clears the carrier's buffer.
        call.say(interruption, then_silence_s=1.5)
        await _until(lambda: call.clears >= 1, timeout=60, what="clear")
        assert call.of_event("clear")[0]["streamSid"] == call.stream_sid
        await _until(lambda: len(llm.requests) >= 3, timeout=60, what="the interrupting turn")
        # Keypad digits reach the LLM as a user message; it says goodbye and hangs up.
        await _settled(llm)
        llm.script(*tool_call(0, "call_9", "end_call", "{}"), Finish("tool_calls"), Done())
        llm.script(*text_reply("Goodbye."))
        for digit in "12#":
            await call.dtmf(digit)
        await _until(
            lambda: any("12#" in text for text in _user_texts(llm)), timeout=60, what="the digits"
        )
        assert any(m["event"] == "mark" for m in call.received)
        await asyncio.wait_for(call.closed.wait(), 60)  # the platform ended the call
        assert llm.pending_scripts == 0

    # The record: transcript, the tool call, usage; the caller's number on it.
    for _ in range(300):
        listed = await asyncio.to_thread(platform.api, "GET", "sessions")
        ended = [s for s in listed["results"] if s["ended_at"]]
        if ended:
            break
        await asyncio.sleep(0.2)
    assert ended, "the session did not end"
    session = await asyncio.to_thread(platform.api, "GET", f"sessions/{ended[0]['id']}")
    assert session["end_user"] == CALLER and session["agent"] == "orders"
    said = [entry["text"] for entry in session["transcript"]]
    assert said[0] == "Hello, this is the order line. How can I help?"
    assert [c["name"] for c in session["tool_calls"]] == ["track_order", "end_call"]
    assert session["tool_calls"][0]["status"] == "completed"
    assert session["usage"]["stt_audio_ms"] > 3000 and session["usage"]["tts_audio_ms"] > 1000
    # The call's minutes, by kind.
    printed = await asyncio.to_thread(platform.manage, "shell", "-c", (
        "import json; from telephony_app.models import PhoneCall; "
        "print(json.dumps(list(PhoneCall.objects.values('status', 'duration_ms', 'session_id'))))"
    ))  # fmt: skip
    minutes = json.loads(printed.strip().splitlines()[-1])
    assert minutes[0]["status"] == "completed" and minutes[0]["duration_ms"] > 5000
    assert minutes[0]["session_id"].replace("-", "") == session["id"].replace("-", "")
    # Phone minutes are a usage figure of their own: the record's, the day's.
    on_line = session["usage"]["phone_call_ms"]
    assert 5000 < on_line and abs(on_line - minutes[0]["duration_ms"]) < 3000
    days = await asyncio.to_thread(platform.api, "GET", "usage?group_by=agent")
    assert days["rows"][0]["phone_call_ms"] == on_line
    # The session.ended webhook names the caller; the logs do not.
    await _until(lambda: bool(hooks.requests), timeout=180, what="the session.ended webhook")
    delivered = json.loads(hooks.requests[0].body)
    assert delivered["type"] == "session.ended"
    assert delivered["data"]["session"]["end_user"] == CALLER
    assert delivered["data"]["session"]["usage"]["phone_call_ms"] == on_line
    log = platform.log.read_text()
    assert "phone call answered" in log and CALLER not in log and CALLER[1:] not in log
