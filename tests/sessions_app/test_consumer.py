"""The realtime WebSocket over the real consumer, the real LLM adapter and a fake LLM server."""

from __future__ import annotations

import html
import json
import random

import pytest
from asgiref.sync import sync_to_async
from django.test import Client as DjangoClient
from django.urls import reverse

from core import leases as live
from secrets_app import services as key_services
from secrets_app.models import ApiKey
from sessions_app import services as agent_services
from sessions_app.models import Session
from tests.engine.providers.fake import silence_pcm, tone_pcm
from tests.engine.providers.llm.openai.fake_server import (
    Delay,
    Done,
    Finish,
    Text,
    text_reply,
    tool_call,
)
from tests.factories import Tenant, make_tenant, order_tool
from tests.sessions_app.wsclient import Client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_leases")]


@pytest.fixture
def tenant(db) -> Tenant:
    return make_tenant("ws@example.com")


def url(tenant: Tenant, **extra: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"key": tenant.publishable_key, **extra}.items())
    return f"/v1/session?{query}"


TEXT_CONFIG = {"type": "configure", "mode": "text", "instructions": "Be brief."}


async def configured(client: Client, config: dict | None = None) -> dict:
    await client.send(config or TEXT_CONFIG)
    return await client.until("ready")


# ---------------------------------------------------------------- refusals


async def _refused(path: str, origin: str | None = "http://localhost:3000") -> tuple[int, dict]:
    async with Client(path, origin=origin) as client:
        code = await client.closed()
        return code, client.events[0]


@pytest.mark.parametrize(
    ("make_path", "origin", "close_code", "error_code"),
    [
        (lambda t: "/v1/session", "http://localhost:3000", 4001, "invalid_key"),
        (lambda t: "/v1/session?key=pk_nope", "http://localhost:3000", 4001, "invalid_key"),
        (
            lambda t: f"/session?key={t.secret_key}",
            "http://localhost:3000",
            4002,
            "secret_key_refused",
        ),
        (lambda t: url(t), "https://evil.example", 4003, "origin_not_allowed"),
        (lambda t: url(t), None, 4003, "origin_not_allowed"),
        (lambda t: url(t, agent="nope"), "http://localhost:3000", 4004, "agent_not_allowed"),
        (lambda t: url(t, protocol="soap"), "http://localhost:3000", 4000, "bad_protocol"),
    ],
)
async def test_refusals_close_with_their_code_and_create_nothing(
    tenant, make_path, origin, close_code, error_code
):
    code, error = await _refused(make_path(tenant), origin)
    assert (code, error["type"], error["code"]) == (close_code, "error", error_code)
    assert error["message"]
    assert await sync_to_async(Session.objects.count)() == 0


async def test_a_draining_process_refuses_new_connections_for_another_to_take(tenant, client):
    """After SIGTERM (``realtime.drain``): /healthz says draining (a 503 the balancer reads,
    not logged as an error) and a new socket is closed with 4503, which the browser library
    retries; the page is told in words."""
    from realtime import drain

    drain._draining = True
    try:
        code, error = await _refused(url(tenant))
        health = await sync_to_async(client.get)("/healthz")
    finally:
        drain.reset()
    assert (code, error["code"]) == (4503, "service_unavailable")
    assert "restarting" in error["message"]
    assert (health.status_code, health.json()) == (503, {"draining": True})
    assert getattr(health, "_has_been_logged", False)  # Django logs no ERROR for it
    assert await sync_to_async(Session.objects.count)() == 0


async def test_revoked_key_is_refused(tenant):
    key = await sync_to_async(ApiKey.objects.get)(workspace=tenant.workspace, kind="publishable")
    await sync_to_async(key_services.api_key_revoke)(key=key)
    code, error = await _refused(url(tenant))
    assert code == 4001 and "revoked" in error["message"]


async def test_agent_outside_the_keys_allowed_agents_is_refused(tenant):
    await sync_to_async(agent_services.agent_create)(
        workspace=tenant.workspace, name="Secret", slug="internal"
    )
    _key, plaintext = await sync_to_async(key_services.api_key_create)(
        workspace=tenant.workspace, kind="publishable", allowed_agents=["orders"]
    )
    code, _ = await _refused(f"/v1/session?key={plaintext}&agent=internal")
    assert code == 4004


async def test_another_workspaces_agent_is_unknown(tenant):
    other = await sync_to_async(make_tenant)("other@example.com")
    await sync_to_async(agent_services.agent_create)(
        workspace=other.workspace, name="Theirs", slug="theirs"
    )
    code, _ = await _refused(url(tenant, agent="theirs"))
    assert code == 4004


async def test_configured_origin_is_exact(db):
    tenant = await sync_to_async(make_tenant)(
        "origin@example.com", allowed_origins=["https://shop.example.com"]
    )
    code, _ = await _refused(url(tenant), origin="http://localhost:3000")
    assert code == 4003
    async with Client(url(tenant), origin="https://shop.example.com") as client:
        await client.send({"type": "text", "text": "hi"})
        assert (await client.next())["code"] == "not_configured"


async def test_ping_before_configure_answers_pong_and_seq_goes_on(tenant, llm):
    async with Client(url(tenant)) as client:
        await client.send({"type": "ping", "t": 42})
        pong = await client.next()
        assert (pong["type"], pong["t"], pong["seq"]) == ("pong", 42, 1)
        ready = await configured(client)
        assert ready["seq"] == 2  # the session numbers on after the early pong
        await client.send({"type": "ping"})
        pong = await client.until("pong")
        assert "t" not in pong and pong["seq"] > 2


async def test_too_many_sessions(tenant, llm, settings):
    settings.SESSION_LIMIT_PER_WORKSPACE = 1
    async with Client(url(tenant)) as first:
        await configured(first)
        async with Client(url(tenant)) as second:  # connecting takes no place; configuring does
            await second.send(TEXT_CONFIG)
            assert (await second.next())["code"] == "too_many_sessions"
            assert await second.closed() == 4029
    async with Client(url(tenant)) as again:  # the first one's place is free again
        await configured(again)


async def test_no_configure_in_time_closes_4000(tenant, settings):
    settings.CONFIGURE_TIMEOUT_S = 0.3
    code, error = await _refused(url(tenant))
    assert (code, error["code"]) == (4000, "configure_timeout")


async def test_inline_config_refused_when_the_key_forbids_it(tenant):
    await sync_to_async(ApiKey.objects.filter(workspace=tenant.workspace).update)(
        allow_inline_config=False
    )
    async with Client(url(tenant)) as client:
        await client.send({"type": "configure", "instructions": "Reveal everything."})
        error = await client.next()
        assert error["code"] == "inline_config_refused"
        assert await client.closed() == 4008


async def test_saved_agent_only_key_serves_the_saved_agent(tenant, llm):
    await sync_to_async(agent_services.agent_create)(
        workspace=tenant.workspace, name="Orders", slug="orders", mode="text",
        instructions="You track orders.", greeting="Hi, order desk.",
    )  # fmt: skip
    await sync_to_async(ApiKey.objects.filter(workspace=tenant.workspace).update)(
        allow_inline_config=False
    )
    async with Client(url(tenant, agent="orders")) as client:
        ready = await configured(client, {"type": "configure", "variables": {"name": "Ann"}})
        assert ready["mode"] == "text"
        assert (await client.next())["text"] == "Hi, order desk."


# ---------------------------------------------------------------- configure


async def test_configure_errors_name_the_field_and_a_fixed_configure_works(tenant, llm):
    tools = [{"name": "a", "client": True}, {"name": "b", "client": True},
             {"name": "bad name", "client": True}]  # fmt: skip
    async with Client(url(tenant)) as client:
        await client.send({**TEXT_CONFIG, "tools": tools})
        error = await client.next()
        assert error["code"] == "invalid" and error["message"].startswith("tools[2].name")
        await client.send({**TEXT_CONFIG, "tools": [{"name": "t", "client": True,
                                                    "parameters": {"x": "strng"}}]})  # fmt: skip
        error = await client.next()
        assert error["code"] == "invalid" and "tools[0].parameters" in error["message"]
        ready = await configured(client)
        assert ready["seq"] == 3  # numbering continues across the errors


async def test_messages_before_configure_are_answered(tenant):
    async with Client(url(tenant)) as client:
        await client.send({"type": "text", "text": "hi"})
        assert (await client.next())["code"] == "not_configured"
        await client.send({"type": "resume", "sessionId": "x", "resumeToken": "y", "lastSeq": 0})
        assert (await client.next())["code"] == "resume_unavailable"


# ---------------------------------------------------------------- turns


async def test_text_turn(tenant, llm):
    llm.script(text_reply("Hello ", "Ann."))
    config = {**TEXT_CONFIG, "instructions": "Help {{name}}.", "variables": {"name": "Ann"},
              "greeting": "Hi {{name}}!"}  # fmt: skip
    async with Client(url(tenant)) as client:
        ready = await configured(client, config)
        assert {
            "sessionId",
            "resumeToken",
            "sampleRate",
            "ttsSampleRate",
            "protocolVersion",
        } <= set(ready)
        assert ready["sampleRate"] == 16000 and ready["protocolVersion"] == 1
        assert (await client.next()) | {"seq": 0, "ts": 0} == {
            "type": "greeting", "text": "Hi Ann!", "seq": 0, "ts": 0}  # fmt: skip
        await client.send({"type": "text", "text": "Where is my order?"})
        chat = await client.until("chat")
        assert chat["text"] == "Hello Ann."
        types = client.types()
        assert types[2:5] == ["turn", "thinking", "chat_delta"]
        seqs = [event["seq"] for event in client.events]
        assert seqs == list(range(1, len(seqs) + 1))
        sent = llm.requests[0].json
        assert sent["messages"][0]["content"] == "Help Ann."
        assert sent["messages"][-1] == {"role": "user", "content": "Where is my order?"}
        assert llm.requests[0].headers["authorization"] == "Bearer test-llm-key"


async def test_voice_turn_with_fake_speech(tenant, llm):
    llm.script(text_reply("It shipped. ", "It arrives Monday."))
    async with Client(url(tenant)) as client:
        ready = await configured(client, {"type": "configure", "mode": "voice"})
        assert ready["ttsSampleRate"] == 24000
        for _ in range(10):
            await client.send_raw(data=tone_pcm(50))
        for _ in range(14):
            await client.send_raw(data=silence_pcm(50))
        turn = await client.until("turn")
        assert turn["text"] == "hello"
        assert "transcript" in client.types()
        await client.until("tts_done")
        assert client.audio and all(len(chunk) % 2 == 0 for chunk in client.audio)


async def test_socket_messages_skip_the_per_message_database_cleanup(tenant, llm, monkeypatch):
    """Channels closes stale database connections before every message through a thread
    hop; audio never touches the database, so its frames skip it (a third of their cost),
    and text messages too (a tenth of a loaded loop, a ping a second per session): what
    they do in the database runs in database_sync_to_async, which cleans up itself."""
    import channels.consumer

    cleanups: list[str] = []
    real = channels.consumer.aclose_old_connections

    async def counted() -> None:
        cleanups.append("cleanup")
        await real()

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)
    llm.script(text_reply("Heard you."))
    async with Client(url(tenant)) as client:
        await configured(client, {"type": "configure", "mode": "voice"})
        before = len(cleanups)
        for _ in range(10):
            await client.send_raw(data=tone_pcm(50))
        for _ in range(14):
            await client.send_raw(data=silence_pcm(50))
        assert (await client.until("turn"))["text"] == "hello"  # the frames were heard
        after_audio = len(cleanups)
        await client.send({"type": "ping", "t": 1})
        await client.until("pong")
        after_text = len(cleanups)
    assert after_audio == before  # 24 audio frames: no clean-up
    assert after_text == after_audio  # nor a text message


async def test_llm_failure_is_an_error_and_the_next_turn_works(tenant, llm, settings):
    from tests.engine.providers.llm.openai.fake_server import HttpError

    for _attempt in range(1 + len(settings.PROVIDER_RETRY_DELAYS_MS)):  # it fails every retry
        llm.script(HttpError(500, "upstream exploded"))
    llm.script(text_reply("Fine now."))
    async with Client(url(tenant)) as client:
        await configured(client)
        await client.send({"type": "text", "text": "one"})
        error = await client.until("error")
        assert error["code"] == "llm_failed"
        await client.send({"type": "text", "text": "two"})
        assert (await client.until("chat"))["text"] == "Fine now."


# ---------------------------------------------------------------- tools


async def test_server_tool_with_the_fake_runner(tenant, llm, settings):
    settings.TOOL_RUNNER = "fake"
    llm.script(*tool_call(0, "call_1", "track_order", '{"order_number": ', '"A1"}'),
               Finish("tool_calls"), Done())  # fmt: skip
    llm.script(text_reply("Your order shipped."))
    async with Client(url(tenant)) as client:
        await configured(client, {**TEXT_CONFIG, "tools": [order_tool()]})
        await client.send({"type": "text", "text": "Track A1"})
        chat = await client.until("chat")
        assert chat["text"] == "Your order shipped."
        assert chat["steps"] == ["Using track_order"]
        statuses = [e["status"] for e in client.events if e["type"] == "tool_status"]
        assert statuses == ["started", "completed"]
        assert "tool_call" not in client.types()  # server tools never reach the browser
        tool_message = llm.requests[1].json["messages"][-1]
        assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
        assert json.loads(tool_message["content"]) == {"ok": True}


async def test_one_step_runs_at_most_its_calls_and_the_turn_keeps_to_its_budget(
    tenant, llm, settings
):
    """A model asked to call a tool hundreds of times, each answer large (a review's
    attack): the rest of the step fails at once, and the next request stays bounded."""
    settings.TOOL_RUNNER = "fake"
    settings.MAX_TOOL_CALLS_PER_STEP = 3
    settings.LLM_REQUEST_MAX_BYTES = 32 * 1024
    calls = [step for n in range(12) for step in tool_call(n, f"c{n}", "track_order", "{}")]
    llm.script(*calls, Finish("tool_calls"), Done())
    llm.script(text_reply("Done."))
    big = {"name": "track_order", "handler": "async () => 1"}
    async with Client(url(tenant)) as client:
        await configured(client, {**TEXT_CONFIG, "tools": [big]})
        await client.send({"type": "text", "text": "twelve at once"})
        assert (await client.until("chat"))["text"] == "Done."
    statuses = [e["status"] for e in client.events if e["type"] == "tool_status"]
    assert statuses.count("completed") == 3 and statuses.count("failed") == 9
    results = [m["content"] for m in llm.requests[1].json["messages"] if m["role"] == "tool"]
    assert sum("too many tool calls in one step (at most 3)" in r for r in results) == 9
    assert len(json.dumps(llm.requests[1].json["messages"])) < 32 * 1024


async def test_client_tool_round_trip(tenant, llm):
    llm.script(*tool_call(0, "call_7", "open_file", '{"path": "app.py"}'), Finish("tool_calls"),
               Done())  # fmt: skip
    llm.script(text_reply("Opened."))
    tool = {"name": "open_file", "client": True, "parameters": {"path": "string"}}
    async with Client(url(tenant)) as client:
        await configured(client, {**TEXT_CONFIG, "tools": [tool]})
        await client.send({"type": "text", "text": "open app.py"})
        call = await client.until("tool_call")
        assert (call["name"], call["arguments"]) == ("open_file", {"path": "app.py"})
        await client.send({"type": "tool_result", "callId": call["callId"], "result": "ok:12"})
        assert (await client.until("chat"))["text"] == "Opened."
        assert json.loads(llm.requests[1].json["messages"][-1]["content"]) == "ok:12"
        await client.send({"type": "tool_result", "callId": call["callId"], "result": "late"})
        assert (await client.until("error"))["code"] == "unknown_tool_call"


async def test_client_tool_timeout_tells_the_llm(tenant, llm):
    llm.script(*tool_call(0, "c1", "slow", "{}"), Finish("tool_calls"), Done())
    llm.script(text_reply("It did not answer."))
    tool = {"name": "slow", "client": True, "timeoutMs": 200}
    async with Client(url(tenant)) as client:
        await configured(client, {**TEXT_CONFIG, "tools": [tool]})
        await client.send({"type": "text", "text": "go"})
        await client.until("chat")
        statuses = [e["status"] for e in client.events if e["type"] == "tool_status"]
        assert statuses == ["started", "timed_out"]
        assert "timed out" in llm.requests[1].json["messages"][-1]["content"]


# ---------------------------------------------------------------- control messages


async def test_cancel_during_streaming(tenant, llm):
    llm.script(Text("First part. "), Delay(3), Text("Never sent."), Finish("stop"), Done())
    llm.script(text_reply("Next."))
    async with Client(url(tenant)) as client:
        await configured(client)
        await client.send({"type": "text", "text": "talk"})
        await client.until("chat_delta")
        await client.send({"type": "cancel"})
        await client.until("cancelled")
        await client.send({"type": "text", "text": "again"})
        assert (await client.until("chat"))["text"] == "Next."
        deltas = [e["text"] for e in client.events if e["type"] == "chat_delta"]
        assert "Never sent." not in deltas
        history = llm.requests[1].json["messages"]
        assert history[-2]["role"] == "assistant" and "Never sent" not in history[-2]["content"]


async def test_reset_context_and_ping(tenant, llm):
    llm.script(text_reply("One."))
    llm.script(text_reply("Two."))
    async with Client(url(tenant)) as client:
        await configured(client, {**TEXT_CONFIG, "instructions": "Brief: {{task_brief}}"})
        await client.send({"type": "text", "text": "first"})
        await client.until("chat")
        await client.send({"type": "reset"})
        await client.until("reset")
        await client.send({"type": "context", "variables": {"task_brief": "fix the bug"}})
        assert await client.ws.receive_nothing(timeout=0.3)  # context never triggers a reply
        await client.send({"type": "ping", "t": 12.5})
        assert (await client.until("pong"))["t"] == 12.5
        await client.send({"type": "text", "text": "second"})
        await client.until("chat")
        messages = llm.requests[1].json["messages"]
        assert messages[0]["content"] == "Brief: fix the bug"
        assert [m["content"] for m in messages if m["role"] == "user"] == ["second"]


async def test_voiceide_codec(tenant, llm):
    llm.script(text_reply("Hi."))
    async with Client(url(tenant, protocol="voiceide")) as client:
        await client.send(TEXT_CONFIG)
        start = await client.next()
        assert set(start) >= {"id", "timestamp", "kind"}
        assert "sessionStart" in start["kind"]
        await client.send({"type": "text", "text": "hello"})
        kinds = []
        while "assistantSpeechFinal" not in kinds:
            kinds.append(next(iter((await client.next())["kind"])))
        assert "userAudioTranscriptFinal" in kinds and "assistantSpeechPartial" in kinds


async def test_malformed_frames_then_a_normal_turn(tenant, llm, settings):
    # Ten or so oversize frames at test speed pass the byte budget (a flood: test_byte_flood).
    settings.WS_INBOUND_KB_PER_SECOND = 4096
    rng = random.Random(1234)
    samples = [
        " ", "{", "[]", "null", '"x"', "{}", '{"type": 5}', '{"type": "dance"}',
        '{"type": "text"}', '{"type": "text", "text": ""}', '{"type": "configure", "mode": "x"}',
        '{"type": "cancel", "playedMs": -1}', '{"type": "tool_result"}', "\x00\xff",
        '{"type": "ping", "t": "soon"}', '{"type": "context", "variables": [1]}',
        "x" * (256 * 1024 + 1),
    ]  # fmt: skip
    llm.script(text_reply("Still here."))
    async with Client(url(tenant)) as client:
        await configured(client)
        for index in range(200):
            if index % 5 == 4:
                await client.send_raw(data=rng.randbytes(rng.randint(1, 64)))
                continue
            frame = rng.choice(samples)
            if rng.random() < 0.3:
                frame = frame[: rng.randint(0, len(frame))] + rng.choice('{}[]",:')
            await client.send_raw(text=frame)
        await client.send({"type": "text", "text": "are you ok?"})
        assert (await client.until("chat", timeout=10))["text"] == "Still here."
        codes = {e.get("code") for e in client.events if e["type"] == "error"}
        assert {"bad_json", "unknown_type", "invalid"} <= codes


async def test_oversized_audio_frame_is_refused_and_session_continues(tenant, llm):
    llm.script(text_reply("ok"))
    async with Client(url(tenant)) as client:
        await configured(client, {"type": "configure", "mode": "voice"})
        await client.send_raw(data=bytes(64 * 1024 + 2))
        assert (await client.until("error"))["code"] == "frame_too_large"
        await client.send({"type": "text", "text": "typed in voice mode"})
        assert (await client.until("chat"))["text"] == "ok"


# ---------------------------------------------------------------- records


async def test_session_is_recorded_with_its_transcript(tenant, llm):
    llm.script(text_reply("Recorded."))
    async with Client(url(tenant)) as client:
        ready = await configured(client)
        await client.send({"type": "text", "text": "remember me"})
        await client.until("chat")
    session = await sync_to_async(Session.objects.get)(public_id=ready["sessionId"])
    assert session.ended_at is not None and session.turn_count == 1
    roles = await sync_to_async(lambda: [(e.role, e.text) for e in session.transcript.all()])()
    assert roles == [("user", "remember me"), ("assistant", "Recorded.")]


async def test_server_tool_runs_in_the_v8_sandbox_in_process(tenant, llm, settings):
    settings.TOOL_RUNNER = "sandbox"
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the embedded default: no broker, a thread here
    llm.script(*tool_call(0, "call_1", "track_order", '{"order_number": "A1"}'),
               Finish("tool_calls"), Done())  # fmt: skip
    llm.script(text_reply("Shipped."))
    async with Client(url(tenant)) as client:
        await configured(client, {**TEXT_CONFIG, "tools": [order_tool()]})
        await client.send({"type": "text", "text": "Track A1"})
        assert (await client.until("chat", timeout=15))["text"] == "Shipped."
        tool_message = llm.requests[1].json["messages"][-1]
        assert json.loads(tool_message["content"]) == {"status": "shipped", "order": "A1"}


async def test_parallel_server_tools_of_one_step_all_finish_in_process(tenant, llm, settings):
    """Four calls in one LLM step once crashed the embedded platform (V8 on threads)."""
    settings.TOOL_RUNNER = "sandbox"
    settings.CELERY_TASK_ALWAYS_EAGER = True
    calls = [step for n in range(4) for step in tool_call(n, f"call_{n}", "one", "{}")]
    llm.script(*calls, Finish("tool_calls"), Done())
    llm.script(text_reply("All four answered."))
    llm.script(text_reply("Still here."))
    tool = {"name": "one", "handler": "async () => 1"}
    async with Client(url(tenant)) as client:
        await configured(client, {**TEXT_CONFIG, "tools": [tool]})
        await client.send({"type": "text", "text": "four at once"})
        assert (await client.until("chat", timeout=30))["text"] == "All four answered."
        await client.send({"type": "text", "text": "and after?"})
        assert (await client.until("chat", timeout=30))["text"] == "Still here."
    statuses = [e["status"] for e in client.events if e["type"] == "tool_status"]
    assert sorted(statuses) == ["completed"] * 4 + ["started"] * 4
    results = [m["content"] for m in llm.requests[1].json["messages"] if m["role"] == "tool"]
    assert results == ["1"] * 4


async def test_a_hostile_handler_fails_alone(tenant, llm, settings):
    settings.TOOL_RUNNER = "sandbox"
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.SANDBOX_WALL_TIME_S = 0.5
    llm.script(*tool_call(0, "c1", "spin", "{}"), Finish("tool_calls"), Done())
    llm.script(text_reply("That tool is broken."))
    tool = {"name": "spin", "handler": "async () => { while (true) {} }"}
    async with Client(url(tenant)) as client:
        await configured(client, {**TEXT_CONFIG, "tools": [tool]})
        await client.send({"type": "text", "text": "spin"})
        await client.until("chat", timeout=15)
        statuses = [e["status"] for e in client.events if e["type"] == "tool_status"]
        assert statuses == ["started", "timed_out"]


async def test_handler_console_goes_to_the_session_record_not_the_logs(
    tenant, llm, settings, caplog
):
    settings.TOOL_RUNNER = "sandbox"
    settings.CELERY_TASK_ALWAYS_EAGER = True
    llm.script(*tool_call(0, "c1", "noisy", "{}"), Finish("tool_calls"), Done())
    llm.script(text_reply("Done."))
    tool = {"name": "noisy", "handler": "() => { console.log('checked inventory 42'); return 1 }"}
    async with Client(url(tenant)) as client:
        ready = await configured(client, {**TEXT_CONFIG, "tools": [tool]})
        await client.send({"type": "text", "text": "go"})
        await client.until("chat", timeout=15)
    session = await sync_to_async(Session.objects.get)(public_id=ready["sessionId"])
    tool_entries = await sync_to_async(
        lambda: [e.text for e in session.transcript.filter(role="tool")]
    )()
    assert tool_entries == ["noisy console:\nchecked inventory 42"]
    assert "checked inventory" not in caplog.text


async def test_a_handler_reading_a_missing_secret_is_told_on_the_session_page(
    tenant, llm, settings
):
    settings.TOOL_RUNNER = "sandbox"
    settings.CELERY_TASK_ALWAYS_EAGER = True
    llm.script(*tool_call(0, "c1", "get_weather", "{}"), Finish("tool_calls"), Done())
    llm.script(text_reply("Done."))
    handler = "(args, ctx) => `Bearer ${ctx.secrets.WEATHER_API_KEY}`"
    async with Client(url(tenant)) as client:
        ready = await configured(client, {**TEXT_CONFIG, "tools": [
            {"name": "get_weather", "handler": handler}]})  # fmt: skip
        await client.send({"type": "text", "text": "go"})
        await client.until("chat", timeout=15)
    said = (
        "[warn] secret WEATHER_API_KEY does not exist in this workspace, so"
        " ctx.secrets.WEATHER_API_KEY is undefined: add it on the dashboard's Secrets page"
    )
    session = await sync_to_async(Session.objects.get)(public_id=ready["sessionId"])
    tool_entries = await sync_to_async(
        lambda: [e.text for e in session.transcript.filter(role="tool")]
    )()
    assert tool_entries == [f"get_weather console:\n{said}"]

    def session_page() -> str:
        browser = DjangoClient()
        browser.force_login(tenant.user)
        path = reverse("dashboard:session", args=[tenant.workspace.pk, session.public_id])
        return html.unescape(browser.get(path).content.decode())

    assert said in await sync_to_async(session_page)()


async def test_a_redis_outage_refuses_new_sessions_in_words(tenant, monkeypatch):
    from redis.exceptions import ConnectionError as RedisConnectionError

    async def down(**_: object) -> bool:
        raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379")

    monkeypatch.setattr(live, "acquire", down)
    async with Client(url(tenant)) as client:
        await client.send(TEXT_CONFIG)
        error = await client.next()
        assert (await client.closed(), error["code"]) == (4503, "service_unavailable")
    assert "6379" not in error["message"]


async def test_a_page_without_origin_is_told_to_serve_itself_from_localhost(tenant):
    code, error = await _refused(url(tenant), origin="null")
    assert code == 4003 and error["code"] == "origin_not_allowed"
    assert "opened from a file" in error["message"] and "http://localhost" in error["message"]
