"""Usage metering: a scripted session's figures are exactly what the fake providers served
(tokens as the LLM server reported them, audio and characters as the speech fakes got and
gave, tool calls and the sandbox CPU the runner reported), per turn and in total."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from core import leases as live
from engine.session import ToolDefinition
from engine.session.usage import USAGE_FIELDS, estimate_tokens
from sessions_app.usage_figures import RECORD_FIELDS
from tests.conftest import api_client
from tests.engine.providers.fake import FakeLLM, silence_pcm, tone_pcm
from tests.engine.providers.fake import tool_call as fake_tool_call
from tests.engine.providers.llm.openai.fake_server import Done, Finish, Usage, text_reply, tool_call
from tests.factories import make_tenant
from tests.sessions_app.harness import started
from tests.sessions_app.recording import (
    CPU_MS_PER_CALL,
    RecordingSTT,
    RecordingTTS,
    ended_session,
    use_recording_providers,
)
from tests.sessions_app.wsclient import Client
from usage_app.models import UsageDaily

pytestmark = pytest.mark.django_db(transaction=True)

FRAME_MS = 20


@pytest.fixture(autouse=True)
def _recording(settings):
    live._memory.clear()
    use_recording_providers(settings)


TOOLS = [
    {"name": "lookup", "parameters": {"order": "string"}, "handler": "async (a) => ({ok: 1})"},
    {"name": "show", "parameters": {"order": "string"}, "client": True},
]


async def _get(secret_key: str, path: str) -> Any:
    return await sync_to_async(api_client(secret_key).get)(path)


async def _speak(client: Client) -> None:
    """Half a second of tone, then enough silence for the fake recogniser to end the turn."""
    for _ in range(25):
        await client.send_raw(data=tone_pcm(FRAME_MS))
    for _ in range(30):
        await client.send_raw(data=silence_pcm(FRAME_MS))


async def test_a_scripted_voice_session_meters_what_the_providers_served(llm):
    tenant = await sync_to_async(make_tenant)("meter@example.com")
    llm.script(
        *tool_call(0, "call_a", "lookup", '{"order": "A1"}'),
        *tool_call(1, "call_b", "show", '{"order": "A1"}'),
        Finish("tool_calls"),
        Usage(prompt_tokens=120, completion_tokens=15),
        Done(),
    )
    llm.script(text_reply("Order A1 has shipped.", usage=Usage(150, 6)))
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "voice", "tools": TOOLS})
        await client.until("ready")
        await _speak(client)
        call = await client.until("tool_call")
        await client.send({"type": "tool_result", "callId": call["callId"], "result": {"ok": 1}})
        metrics = await client.until("metrics", timeout=10)  # after the reply's tts_done
    assert all("include_usage" in str(r.json.get("stream_options")) for r in llm.requests)

    session = await ended_session()
    expected = {
        "llm_requests": 2,
        "prompt_tokens": 270,
        "completion_tokens": 21,
        "estimated_llm_requests": 0,
        "stt_audio_ms": RecordingSTT.received_bytes() * 1000 // 32_000,
        "tts_characters": sum(RecordingTTS.characters),
        "tts_audio_ms": sum(RecordingTTS.served_bytes) * 1000 // 48_000,
        "server_tool_calls": 1,
        "tool_cpu_ms": round(CPU_MS_PER_CALL),
        "client_tool_calls": 1,
        "phone_call_ms": 0,  # a browser session
    }
    assert RecordingSTT.received_bytes() == 55 * 640  # every frame reached the recogniser
    assert expected["tts_characters"] == len("Order A1 has shipped.")
    assert session.usage == expected

    turn = metrics["usage"]  # the turn's own figures, on the wire too
    assert (turn["llmRequests"], turn["promptTokens"], turn["completionTokens"]) == (2, 270, 21)
    assert (turn["serverToolCalls"], turn["clientToolCalls"], turn["toolCpuMs"]) == (1, 1, 12)

    detail = await _get(tenant.secret_key, f"/api/v1/sessions/{session.public_id}")
    assert detail.json()["usage"] == expected
    assert detail.json()["turns"][0]["usage"]["prompt_tokens"] == 270

    day = await sync_to_async(UsageDaily.objects.get)(workspace=tenant.workspace)
    assert {name: getattr(day, name) for name in RECORD_FIELDS} == expected
    assert (day.day, day.sessions, day.agent_key) == (timezone.now().date(), 1, 0)


async def test_a_provider_without_usage_is_estimated_and_marked(llm):
    tenant = await sync_to_async(make_tenant)("estimate@example.com")
    llm.script(text_reply("It shipped on Monday."))  # no usage chunk at all
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "text", "instructions": "Be brief."})
        await client.until("ready")
        await client.send({"type": "text", "text": "Where is order A1?"})
        metrics = await client.until("metrics")
    asked = llm.requests[0].json
    prompt = estimate_tokens(json.dumps(asked["messages"], ensure_ascii=False) + "[]")
    assert metrics["usage"]["estimatedLlmRequests"] == 1
    assert metrics["usage"]["promptTokens"] == prompt > 0
    assert metrics["usage"]["completionTokens"] == estimate_tokens("It shipped on Monday.")
    session = await ended_session()
    assert session.usage["estimated_llm_requests"] == 1


async def test_usage_of_other_workspaces_is_not_visible(llm):
    owner = await sync_to_async(make_tenant)("mine@example.com")
    outsider = await sync_to_async(make_tenant)("theirs@example.com")
    llm.script(text_reply("Hi.", usage=Usage(9, 1)))
    async with Client(f"/v1/session?key={owner.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "text"})
        await client.until("ready")
        await client.send({"type": "text", "text": "hello"})
        await client.until("metrics")
    session = await ended_session()
    theirs = await _get(outsider.secret_key, f"/api/v1/sessions/{session.public_id}")
    assert theirs.status_code == 404
    report = (await _get(outsider.secret_key, "/api/v1/usage")).json()
    assert report["total"]["prompt_tokens"] == 0 and report["total"]["sessions"] == 0
    mine = (await _get(owner.secret_key, "/api/v1/usage")).json()
    assert mine["total"]["prompt_tokens"] == 9 and mine["total"]["sessions"] == 1


# ---------------------------------------------------------------- the orchestrator alone


async def test_an_interrupted_round_is_still_a_request_and_is_estimated(make):
    from tests.engine.providers.fake import Delay

    harness = await started(make, llm=FakeLLM(script=[["Once upon ", Delay(5), "a time."]]))
    await harness.say("tell me a story")
    await harness.wait_for("chat_delta")
    await harness.session.cancel()
    await harness.wait_for("metrics")
    usage = harness.of_type("metrics")[0]["usage"]
    assert usage["llmRequests"] == 1 and usage["estimatedLlmRequests"] == 1
    assert usage["completionTokens"] == estimate_tokens("Once upon ")


async def test_the_offline_stand_in_is_not_metered(make):
    harness = make()
    harness.session.config.llm_name = "offline"
    await harness.session.start()
    await harness.say("hello")
    await harness.wait_for("metrics")
    assert harness.of_type("metrics")[0]["usage"]["llmRequests"] == 0


async def test_takes_add_up_to_the_total(make):
    harness = await started(
        make,
        llm=FakeLLM(script=[[fake_tool_call("lookup", {"order": "A"})], "Done.", "Again."]),
        tools=[ToolDefinition(name="lookup", handler="async () => 1")],
    )
    await harness.say("one")
    await harness.wait_for("metrics")
    await harness.say("two")
    await harness.wait_for("metrics", count=2)
    turns = [event["usage"]["llmRequests"] for event in harness.of_type("metrics")]
    rest = harness.session.take_usage()
    assert sum(turns) + rest["llm_requests"] == 3


def test_the_figures_are_one_list_everywhere():
    from usage_app.models import UsageFigures

    columns = [f.name for f in UsageFigures._meta.get_fields()]
    assert columns == list(RECORD_FIELDS)
    assert RECORD_FIELDS[: len(USAGE_FIELDS)] == USAGE_FIELDS  # the engine's, then the doors'
