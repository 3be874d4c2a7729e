"""What a session leaves behind: its tool calls (scrubbed of secrets) and per-turn timelines."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse

from engine import protocol
from engine.providers import registry
from engine.session import SessionConfig, ToolDefinition, VoiceSession
from engine.session.config import SettledToolCall
from secrets_app import services as secret_services
from secrets_app.models import ApiKey
from sessions_app import services
from sessions_app.models import Session, ToolCallRecord
from tests.engine.providers.fake import FakeLLM, FakeToolRunner, ToolHandler, tool_call
from tests.engine.providers.llm.openai import fake_server as fake_openai
from tests.factories import Tenant, make_tenant, order_tool
from tests.sessions_app.harness import until
from tests.sessions_app.wsclient import Client

pytestmark = pytest.mark.usefixtures("no_leases")

SECRET_VALUE = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
MASK = "[secret STRIPE_KEY]"
TEXT_CONFIG = {"type": "configure", "mode": "text", "instructions": "Be brief."}


def _leaky_handlers() -> dict[str, ToolHandler]:
    def refund(args: dict[str, Any]) -> Any:
        raise RuntimeError(f"refund refused for key {SECRET_VALUE}")

    return {
        "track_order": lambda args: {"status": "shipped", "token": SECRET_VALUE},
        "refund": refund,
    }


@dataclass
class LeakyToolRunner(FakeToolRunner):
    """A runner that hands secret values back unscrubbed: the record must mask them anyway."""

    handlers: dict[str, ToolHandler] = field(default_factory=_leaky_handlers)


@pytest.fixture
def tenant(transactional_db: None) -> Tenant:
    tenant = make_tenant("records@example.com")
    secret_services.secret_set(
        workspace=tenant.workspace, name="STRIPE_KEY", value=SECRET_VALUE,
        allowed_hosts=["api.stripe.com"],
    )  # fmt: skip
    return tenant


@pytest.fixture
def leaky_runner(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry._ADDED["tools"], "leaky", f"{__name__}.{LeakyToolRunner.__name__}")
    settings.TOOL_RUNNER = "leaky"


async def _run(tenant: Tenant, config: dict[str, Any], text: str) -> Session:
    """One typed turn through the real consumer; the session's record once it closed."""
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send(config)
        ready = await client.until("ready")
        await client.send({"type": "text", "text": text})
        await client.until("metrics")
    return await sync_to_async(Session.objects.get)(public_id=ready["sessionId"])


def _tool_calls(session: Session) -> list[ToolCallRecord]:
    return list(session.tool_calls.all())


# ---------------------------------------------------------------- through the consumer


@pytest.mark.django_db(transaction=True)
async def test_server_tool_calls_are_recorded_with_secrets_masked(
    tenant: Tenant, llm: fake_openai.FakeOpenAIServer, leaky_runner: None
) -> None:
    arguments = json.dumps({"order_number": f"A1 {SECRET_VALUE}"})
    llm.script(
        *fake_openai.tool_call(0, "call_1", "track_order", arguments),
        *fake_openai.tool_call(1, "call_2", "refund", "{}"),
        fake_openai.Finish("tool_calls"),
        fake_openai.Done(),
    )
    llm.script(fake_openai.text_reply("It shipped; no refund."))
    refund = {"name": "refund", "handler": "async () => null"}
    session = await _run(tenant, {**TEXT_CONFIG, "tools": [order_tool(), refund]}, "Track A1")

    calls = {call.name: call for call in await sync_to_async(_tool_calls)(session)}
    track, refused = calls["track_order"], calls["refund"]
    assert (track.call_id, track.status) == ("call_1", "completed")
    assert track.arguments == {"order_number": f"A1 {MASK}"}
    assert json.loads(track.result) == {"status": "shipped", "token": MASK}
    assert track.duration_ms is not None and track.duration_ms >= 0
    assert (refused.status, refused.error) == ("failed", f"refund refused for key {MASK}")
    stored = [json.dumps(c.arguments) + c.result + c.error for c in calls.values()]
    assert not any(SECRET_VALUE in text for text in stored)
    assert session.tool_call_count == 2

    (turn,) = await sync_to_async(lambda: list(session.turns.all()))()
    stages = [entry["stage"] for entry in turn.metrics["timeline"]]
    assert sorted(stages[:2]) == ["tool:refund", "tool:track_order"]
    assert stages[2:] == ["llm_first_token", "turn"]


@pytest.mark.django_db(transaction=True)
async def test_the_greeting_opens_the_transcript_and_the_first_turn_is_turn_1(
    tenant: Tenant, llm: fake_openai.FakeOpenAIServer, client: Any
) -> None:
    llm.script(fake_openai.text_reply("Paris."))
    greeted = {**TEXT_CONFIG, "greeting": "Hi! Ask me anything."}
    session = await _run(tenant, greeted, "Capital of France?")

    def recorded() -> tuple[list[tuple[str, str]], list[int], int]:
        entries = [(e.role, e.text) for e in session.transcript.all()]
        turns = [turn.turn_id for turn in session.turns.all()]
        session.refresh_from_db()
        return entries, turns, session.turn_count

    entries, turns, count = await sync_to_async(recorded)()
    assert entries == [
        ("assistant", "Hi! Ask me anything."),
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
    ]
    assert (turns, count) == ([1], 1)  # the greeting is no turn of the user's

    def detail_page() -> str:
        client.force_login(tenant.user)
        path = reverse("dashboard:session", args=[tenant.workspace.pk, session.public_id])
        return str(client.get(path).content.decode())

    html = await sync_to_async(detail_page)()
    assert "<h3>Turn 1</h3>" in html and "Turn 2" not in html
    assert "Hi! Ask me anything." in html


@pytest.mark.django_db(transaction=True)
async def test_a_client_tools_result_from_the_browser_is_masked_too(
    tenant: Tenant, llm: fake_openai.FakeOpenAIServer
) -> None:
    llm.script(
        *fake_openai.tool_call(0, "call_7", "read_clipboard", "{}"),
        fake_openai.Finish("tool_calls"),
        fake_openai.Done(),
    )
    llm.script(fake_openai.text_reply("Done."))
    tool = {"name": "read_clipboard", "client": True}
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({**TEXT_CONFIG, "tools": [tool]})
        ready = await client.until("ready")
        await client.send({"type": "text", "text": "paste it"})
        call = await client.until("tool_call")
        pasted = {"text": f"my key is {SECRET_VALUE}", "big": "x" * 10_000}
        await client.send({"type": "tool_result", "callId": call["callId"], "result": pasted})
        await client.until("metrics")
    session = await sync_to_async(Session.objects.get)(public_id=ready["sessionId"])
    (record,) = await sync_to_async(_tool_calls)(session)
    assert record.status == "completed" and record.arguments == {}
    assert record.result.startswith(f'{{"text": "my key is {MASK}"')
    assert SECRET_VALUE not in record.result
    assert len(record.result.encode()) <= services.TOOL_TEXT_MAX_BYTES
    assert record.result.endswith("[truncated]")


# ---------------------------------------------------------------- the record service


def _session_of(tenant: Tenant) -> Session:
    key = ApiKey.objects.get(workspace=tenant.workspace, kind="publishable")
    return services.session_record_start(
        session_id="0" * 32, workspace=tenant.workspace, api_key=key, origin="", mode="text",
        agent=None,
    )  # fmt: skip


def test_a_secret_cut_by_the_size_cap_is_still_masked(tenant: Tenant) -> None:
    session = _session_of(tenant)
    # The secret straddles the 4 KB cut: capping before masking would keep its first bytes.
    padding = "x" * (services.TOOL_TEXT_MAX_BYTES - 20)
    record = services.session_record_tool_call(
        session=session, call_id="c1", name="dump", arguments="{not json " + SECRET_VALUE,
        status="completed", result=padding + SECRET_VALUE, error=None, duration_ms=12.345,
    )  # fmt: skip
    assert record.result == padding + MASK  # masked first, and then short enough to keep
    assert record.arguments == "{not json " + MASK  # text that never parsed stays text
    assert record.duration_ms == 12.3 and record.error == ""


def test_another_workspaces_secrets_are_not_theirs_to_mask(tenant: Tenant) -> None:
    other = make_tenant("other@example.com")
    session = _session_of(other)
    record = services.session_record_tool_call(
        session=session, call_id="c1", name="echo", arguments={"q": SECRET_VALUE},
        status="completed", result=None, error=None, duration_ms=None,
    )  # fmt: skip
    # Masking uses the session's own workspace: another tenant's values mean nothing here
    # (and naming them would reveal that they exist).
    assert record.arguments == {"q": SECRET_VALUE}


def test_the_admin_shows_tool_calls_read_only(tenant: Tenant, client: Any) -> None:
    from secrets_app.models import User

    staff = User.objects.create_superuser(email="staff@example.com", password="pw-staff-123")
    client.force_login(staff)
    session = _session_of(tenant)
    services.session_record_tool_call(
        session=session, call_id="c1", name="track_order", arguments={"order_number": "A1"},
        status="failed", result=None, error="order service down", duration_ms=5.0,
    )  # fmt: skip
    html = client.get(f"/admin/sessions_app/session/{session.pk}/change/").content.decode()
    assert "track_order" in html and "order service down" in html
    assert 'name="tool_calls-0-name"' not in html and 'name="tool_calls-0-error"' not in html


# ---------------------------------------------------------------- the REST API


def test_the_session_detail_api_lists_tool_calls(tenant: Tenant) -> None:
    from rest_framework.test import APIClient

    session = _session_of(tenant)
    services.session_record_tool_call(
        session=session, call_id="c1", name="track_order", arguments={"order_number": "A1"},
        status="completed", result='{"status": "shipped"}', error=None, duration_ms=41.0,
    )  # fmt: skip
    services.session_record_turn(
        session=session,
        metrics={"turnId": 1, "timeline": [{"stage": "turn", "startMs": 0.0, "endMs": 90.5}]},
    )
    path = f"/api/v1/sessions/{session.public_id}"
    owner_api = APIClient()
    owner_api.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant.secret_key}")
    detail = owner_api.get(path).json()
    (call,) = detail["tool_calls"]
    assert call | {"created_at": None} == {
        "call_id": "c1", "name": "track_order", "arguments": {"order_number": "A1"},
        "status": "completed", "result": '{"status": "shipped"}', "error": "",
        "duration_ms": 41.0, "created_at": None,
    }  # fmt: skip
    assert detail["turns"][0]["timeline"] == [{"stage": "turn", "start_ms": 0.0, "end_ms": 90.5}]

    outsider = make_tenant("outsider@example.com")
    outsider_api = APIClient()
    outsider_api.credentials(HTTP_AUTHORIZATION=f"Bearer {outsider.secret_key}")
    assert outsider_api.get(path).status_code == 404


# ---------------------------------------------------------------- the orchestrator's report

WEATHER = ToolDefinition(name="get_weather", handler="async () => ({temp: 21})")
OPEN_FILE = ToolDefinition(name="open_file", client=True)


@dataclass
class Reporting:
    """A text session wired to fakes, with the tool calls it reported as settled."""

    session: VoiceSession
    settled: list[SettledToolCall] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    async def say(self, text: str) -> None:
        await self.session.handle(protocol.TextMessage(text=text))

    def saw(self, event_type: str) -> bool:
        return any(event["type"] == event_type for event in self.events)


@pytest.fixture
async def reporting() -> AsyncIterator[Callable[..., Reporting]]:
    made: list[Reporting] = []

    def factory(llm: FakeLLM, runner: FakeToolRunner | None = None, **config: Any) -> Reporting:
        settled: list[SettledToolCall] = []
        events: list[dict[str, Any]] = []

        async def emit(event: protocol.Stamped) -> None:
            events.append(event.to_wire())

        async def send_audio(chunk: bytes) -> None:
            pass

        session = VoiceSession(
            config=SessionConfig(
                session_id="s1",
                resume_token="r1",
                workspace_id=7,
                llm_name="fake",
                mode="text",
                **config,
            ),
            llm=llm,
            tool_runner=runner or FakeToolRunner(),
            emit=emit,
            send_audio=send_audio,
            on_tool_settled=settled.append,
        )
        made.append(Reporting(session, settled, events))
        return made[-1]

    yield factory
    for made_one in made:
        await made_one.session.close()


async def test_an_interrupted_client_call_is_reported_as_cancelled(
    reporting: Callable[..., Reporting],
) -> None:
    llm = FakeLLM(script=[[tool_call("open_file", {"path": "a.py"}, id="c1")], ["ok"]])
    run = reporting(llm, tools=[OPEN_FILE])
    await run.session.start()
    await run.say("open it")
    await until(lambda: run.saw("tool_call"))
    await run.session.cancel()
    (call,) = run.settled
    assert (call.call_id, call.name, call.status) == ("c1", "open_file", "cancelled")
    assert call.arguments == {"path": "a.py"} and call.result is None
    assert call.error == "cancelled: the user interrupted"


async def test_a_server_tool_outliving_its_turn_is_still_reported(
    reporting: Callable[..., Reporting],
) -> None:
    llm = FakeLLM(script=[[tool_call("get_weather", {"city": "Oslo"}, id="c1")], ["never"]])
    runner = FakeToolRunner(handlers={"get_weather": lambda args: {"temp": -3}}, delay=0.1)
    run = reporting(llm, runner, tools=[WEATHER])
    await run.session.start()
    await run.say("weather")
    await until(lambda: bool(runner.invocations))
    await run.session.cancel()
    assert run.settled == []  # still running: the turn is over, the tool is not
    await until(lambda: bool(run.settled))
    (call,) = run.settled
    assert (call.status, call.result) == ("completed", '{"temp": -3}')
    assert call.duration_ms >= 90
    (metrics,) = [event for event in run.events if event["type"] == "metrics"]
    assert metrics["tools"] == []  # it finished after its turn's figures were reported


async def test_arguments_that_never_parsed_are_reported_as_sent(
    reporting: Callable[..., Reporting],
) -> None:
    llm = FakeLLM(script=[[tool_call("get_weather", "{city: Oslo", id="c1")], ["Sorry."]])
    run = reporting(llm, tools=[WEATHER])
    await run.session.start()
    await run.say("weather")
    await until(lambda: bool(run.settled))
    (call,) = run.settled
    assert (call.status, call.arguments) == ("failed", "{city: Oslo")
    assert call.error is not None and call.error.startswith("invalid arguments")


@pytest.mark.django_db
async def test_queued_record_writes_take_one_thread_hop_in_order_past_a_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from realtime import records

    hops: list[int] = []
    in_writer = records._in_writer

    def counted(operations: list[Callable[[], Any]]) -> list[Any]:
        hops.append(len(operations))
        return in_writer(operations)

    monkeypatch.setattr(records, "_in_writer", counted)
    recorder = records.SessionRecorder()
    recorder._task = asyncio.create_task(recorder._write_loop())
    done: list[str] = []
    followed: list[Any] = []

    async def follow_up(result: Any) -> None:
        followed.append(result)

    def broken() -> None:
        raise RuntimeError("a row that quotes the transcript")

    # A turn's writes arrive in one step of the loop: transcript, reply, count, usage.
    recorder._write(lambda: done.append("user"))
    recorder._write(broken)
    recorder._write(lambda: done.append("assistant") or "reply", then=follow_up)
    recorder._write(lambda: done.append("usage") or None, then=follow_up)
    await recorder.pause()

    assert hops == [4]  # one hop for the turn, not one per write
    assert done == ["user", "assistant", "usage"]  # in order, past the failed write
    assert followed == ["reply", None]
