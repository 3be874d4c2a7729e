"""Resuming a session after an unclean disconnect, over the real consumer and a fake LLM.

A client that drops (close code 1006: no close frame) and comes back with ``resume``
gets exactly the events it missed, in order, and the conversation goes on. The same
tests run on the embedded in-memory store, and with ``REDIS_URL`` on the Redis one.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from core import leases as live
from engine.providers import registry
from engine.resume.store import MemoryResumeStore
from engine.session import ToolDefinition
from engine.tools.call import ToolRequest, ToolResult
from engine.tools.runner import ToolRunner
from realtime import resume
from realtime.resume import host as host_module
from realtime.resume.store import RedisResumeStore, _memory_store
from sessions_app.models import Session
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

pytestmark = pytest.mark.django_db(transaction=True)

TEXT_CONFIG = {"type": "configure", "mode": "text", "instructions": "Be brief."}
UNCLEAN = 1006  # what the server sees when the network drops: no close frame


async def _clean_redis() -> None:
    client = live.redis_client()
    for pattern in ("voice:live:*", "voice:resume:*"):
        for key in await client.keys(pattern):
            await client.delete(key)


@pytest.fixture(autouse=True)
async def clean_state():
    if settings.REDIS_URL:
        await _clean_redis()
    live._memory.clear()
    _memory_store.clear()
    yield
    await resume.hosts_end_all()  # a test that left a session detached


@pytest.fixture
def tenant(db) -> Tenant:
    return make_tenant("resume@example.com")


def url(tenant: Tenant) -> str:
    return f"/v1/session?key={tenant.publishable_key}"


async def started(tenant: Tenant, config: dict[str, Any] | None = None) -> tuple[Client, dict]:
    client = Client(url(tenant))
    await client.__aenter__()
    await client.send(config or TEXT_CONFIG)
    return client, await client.until("ready")


async def drop(client: Client) -> int:
    """The network goes away; the last seq the client saw."""
    await client.ws.disconnect(code=UNCLEAN)
    return max(event["seq"] for event in client.events)


async def resumed(tenant: Tenant, ready: dict, last_seq: int) -> Client:
    """Reconnect as the browser library does: `resume` first, then a `ping`."""
    client = Client(url(tenant))
    await client.__aenter__()
    await client.send({"type": "resume", "sessionId": ready["sessionId"],
                       "resumeToken": ready["resumeToken"], "lastSeq": last_seq})  # fmt: skip
    await client.send({"type": "ping", "t": 1})
    return client


def seqs(events: list[dict]) -> list[int]:
    return [event["seq"] for event in events]


async def record(session_id: str) -> Session:
    return await sync_to_async(Session.objects.get)(public_id=session_id)


async def wait_for(predicate: Any, timeout: float = 5) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


# ---------------------------------------------------------------- resuming


async def test_resume_sends_exactly_the_missed_events_and_the_conversation_goes_on(tenant, llm):
    llm.script(text_reply("Hi Ann."))
    llm.script(Text("Part one. "), Delay(0.4), Text("Part two."), Finish("stop"), Done())
    llm.script(text_reply("Yes, I remember."))
    first, ready = await started(tenant)
    await first.send({"type": "text", "text": "I am Ann."})
    await first.until("metrics")
    await first.send({"type": "text", "text": "Tell me two parts."})
    await first.until("chat_delta")
    last_seq = await drop(first)
    await wait_for(lambda: len(llm.requests) == 2)
    await asyncio.sleep(0.6)  # the turn finishes while nobody listens

    second = await resumed(tenant, ready, last_seq)
    await second.until("pong")
    replayed = second.events[:-1]
    assert [e["type"] for e in replayed] == ["chat_delta", "chat", "metrics"]
    assert replayed[0]["text"] == "Part two."
    assert replayed[1]["text"] == "Part one. Part two."
    assert seqs(second.events) == list(range(last_seq + 1, last_seq + 5))

    await second.send({"type": "text", "text": "Do you remember me?"})
    assert (await second.until("chat"))["text"] == "Yes, I remember."
    conversation = [(m["role"], m["content"]) for m in llm.requests[2].json["messages"]]
    assert conversation[1:] == [
        ("user", "I am Ann."),
        ("assistant", "Hi Ann."),
        ("user", "Tell me two parts."),
        ("assistant", "Part one. Part two."),
        ("user", "Do you remember me?"),
    ]
    everything = seqs(first.events) + seqs(second.events)
    assert everything == list(range(1, len(everything) + 1))  # none lost, none twice
    session = await record(ready["sessionId"])
    assert session.ended_at is None  # one session all along, still going
    await second.ws.disconnect()
    session = await record(ready["sessionId"])
    assert (session.turn_count, session.close_code) == (3, 1000)
    assert session.ended_at is not None


async def test_resume_while_the_turn_still_runs_continues_live(tenant, llm):
    llm.script(Text("Slow "), Delay(0.5), Text("reply."), Finish("stop"), Done())
    first, ready = await started(tenant)
    await first.send({"type": "text", "text": "go"})
    await first.until("thinking")
    last_seq = await drop(first)
    second = await resumed(tenant, ready, last_seq)
    assert (await second.until("chat"))["text"] == "Slow reply."
    assert seqs(second.events) == list(range(last_seq + 1, last_seq + 1 + len(second.events)))
    assert second.types().count("chat") == 1
    await second.ws.disconnect()


async def test_resume_from_the_start_replays_ready_with_its_token(tenant, llm):
    first, ready = await started(tenant, {**TEXT_CONFIG, "greeting": "Hello there."})
    await first.until("greeting")
    await drop(first)
    second = await resumed(tenant, ready, 0)
    await second.until("pong")
    assert second.types()[:2] == ["ready", "greeting"]
    assert second.events[0]["resumeToken"] == ready["resumeToken"]
    await second.ws.disconnect()


async def test_wrong_token_is_refused_and_closed_4001(tenant, llm):
    first, ready = await started(tenant)
    last_seq = await drop(first)
    intruder = await resumed(tenant, {**ready, "resumeToken": "not-" + ready["resumeToken"]}, 0)
    error = await intruder.next()
    assert (error["type"], error["code"]) == ("error", "resume_refused")
    assert await intruder.closed() == 4001
    assert ready["resumeToken"] not in json.dumps(intruder.events)
    owner = await resumed(tenant, ready, last_seq)  # the session was not harmed
    assert (await owner.until("pong"))["seq"] == last_seq + 1
    await owner.ws.disconnect()


async def _resume_with(path: str, ready: dict, last_seq: int, origin: str) -> Client:
    client = Client(path, origin=origin)
    await client.__aenter__()
    await client.send({"type": "resume", "sessionId": ready["sessionId"],
                       "resumeToken": ready["resumeToken"], "lastSeq": last_seq})  # fmt: skip
    return client


async def test_resume_is_bound_to_the_key_and_origin_the_session_started_on(tenant, llm):
    """The right resume token through another key of the workspace, or from another page
    origin (a script can send any), is refused like a wrong token; the session lives on."""
    from secrets_app import services as key_services

    _other, other_key = await sync_to_async(key_services.api_key_create)(
        workspace=tenant.workspace, kind="publishable", allow_inline_config=True,
        allowed_origins=["https://elsewhere.example", "http://localhost:3000"],
    )  # fmt: skip
    first, ready = await started(tenant)
    last_seq = await drop(first)
    attempts = [
        (f"/v1/session?key={other_key}", "http://localhost:3000"),  # another key
        (url(tenant), "http://localhost:8080"),  # another origin the key allows
    ]
    intruders = await asyncio.gather(
        *(_resume_with(path, ready, 0, origin) for path, origin in attempts * 3)
    )
    for intruder in intruders:
        error = await intruder.next()
        assert (error["code"], await intruder.closed()) == ("resume_refused", 4001)
        assert "chat" not in intruder.types() and "ready" not in intruder.types()
    owner = await resumed(tenant, ready, last_seq)  # the session was not harmed
    assert (await owner.until("pong"))["seq"] == last_seq + 1
    await owner.ws.disconnect()


async def test_an_expired_session_is_unavailable_and_a_new_one_can_start(tenant, llm, settings):
    settings.SESSION_RESUME_TTL = 0.3
    first, ready = await started(tenant)
    last_seq = await drop(first)
    await asyncio.sleep(0.6)
    late = await resumed(tenant, ready, last_seq)
    error = await late.next()
    assert (error["code"], error["seq"]) == ("resume_unavailable", 1)
    await late.send(TEXT_CONFIG)  # the socket stays open for a new session
    fresh = await late.until("ready")
    assert fresh["sessionId"] != ready["sessionId"]
    session = await record(ready["sessionId"])
    assert session.ended_at is not None and session.close_code == UNCLEAN
    await late.ws.disconnect()


async def test_a_clean_close_ends_the_session_at_once(tenant, llm):
    first, ready = await started(tenant)
    await first.ws.disconnect(code=1000)
    assert resume.local_host(ready["sessionId"]) is None
    again = await resumed(tenant, ready, 1)
    assert (await again.next())["code"] == "resume_unavailable"
    assert (await record(ready["sessionId"])).ended_at is not None
    await again.ws.disconnect()


async def test_the_outsider_cannot_resume_even_with_the_token(tenant, llm, outsider):
    first, ready = await started(tenant)
    last_seq = await drop(first)
    stranger = await resumed(outsider, ready, 0)
    error = await stranger.next()
    assert error["code"] == "resume_unavailable"  # the session is unknown to them
    assert stranger.types() == ["error"]
    await stranger.ws.disconnect()
    owner = await resumed(tenant, ready, last_seq)
    await owner.until("pong")
    await owner.ws.disconnect()


# ---------------------------------------------------------------- tools


class SlowToolRunner(ToolRunner):
    """A server tool that takes a while (a slow API behind a sandboxed handler)."""

    def __init__(self, *, reply_channel: str = "") -> None:
        self.reply_channel = reply_channel

    async def run(self, invocation: ToolRequest) -> ToolResult:
        await asyncio.sleep(0.5)
        order = invocation.arguments["order_number"]
        return ToolResult("completed", result=json.dumps({"order": order, "status": "shipped"}))


@pytest.fixture
def slow_tools(settings):
    registry.register("tools", "slow_test", f"{__name__}.SlowToolRunner")
    settings.TOOL_RUNNER = "slow_test"


async def test_a_tool_running_at_the_drop_completes_into_the_resumed_history(
    tenant, llm, slow_tools
):
    llm.script(*tool_call(0, "call_1", "track_order", '{"order_number": "A1"}'),
               Finish("tool_calls"), Done())  # fmt: skip
    llm.script(text_reply("A1 has shipped."))
    llm.script(text_reply("Still shipped."))
    first, ready = await started(tenant, {**TEXT_CONFIG, "tools": [order_tool()]})
    await first.send({"type": "text", "text": "Where is A1?"})
    await first.until("tool_status")  # started
    last_seq = await drop(first)
    await asyncio.sleep(1.0)

    second = await resumed(tenant, ready, last_seq)
    await second.until("pong")
    assert second.types() == ["tool_status", "chat_delta", "chat", "metrics", "pong"]
    assert second.events[0]["status"] == "completed"
    await second.send({"type": "text", "text": "And now?"})
    await second.until("chat")
    tool_message = next(m for m in llm.requests[2].json["messages"] if m["role"] == "tool")
    assert json.loads(tool_message["content"]) == {"order": "A1", "status": "shipped"}
    await second.ws.disconnect()


async def test_a_tool_running_at_a_handover_completes_before_the_session_moves(
    tenant, llm, slow_tools
):
    llm.script(*tool_call(0, "call_1", "track_order", '{"order_number": "B2"}'),
               Finish("tool_calls"), Done())  # fmt: skip
    llm.script(text_reply("B2 has shipped."))
    llm.script(text_reply("Yes."))
    first, ready = await started(tenant, {**TEXT_CONFIG, "tools": [order_tool()]})
    await first.send({"type": "text", "text": "Where is B2?"})
    await first.until("tool_status")  # started
    last_seq = await drop(first)
    host_module._hosts.pop(ready["sessionId"])  # as if the resume reached another process

    second = await resumed(tenant, ready, last_seq)
    await second.until("pong", timeout=15)
    assert second.types() == ["tool_status", "chat_delta", "chat", "metrics", "pong"]
    await second.send({"type": "text", "text": "Sure?"})
    await second.until("chat")
    tool_message = next(m for m in llm.requests[2].json["messages"] if m["role"] == "tool")
    assert json.loads(tool_message["content"]) == {"order": "B2", "status": "shipped"}
    await second.ws.disconnect()


# ---------------------------------------------------------------- the session limit


async def test_a_waiting_session_counts_once_and_can_resume_at_the_limit(tenant, llm, settings):
    settings.SESSION_LIMIT_PER_WORKSPACE = 1
    first, ready = await started(tenant)
    last_seq = await drop(first)
    assert await live.count(pool=live.workspace_pool(tenant.workspace.pk)) == 1
    other = Client(url(tenant))
    await other.__aenter__()
    await other.send(TEXT_CONFIG)
    assert (await other.next())["code"] == "too_many_sessions"
    assert await other.closed() == 4029
    second = await resumed(tenant, ready, last_seq)
    await second.until("pong")
    assert await live.count(pool=live.workspace_pool(tenant.workspace.pk)) == 1
    await second.ws.disconnect()
    assert await live.count(pool=live.workspace_pool(tenant.workspace.pk)) == 0


async def test_an_expired_session_frees_its_place(tenant, llm, settings):
    settings.SESSION_LIMIT_PER_WORKSPACE = 1
    settings.SESSION_RESUME_TTL = 0.2
    first, _ready = await started(tenant)
    await drop(first)
    await asyncio.sleep(0.5)
    assert await live.count(pool=live.workspace_pool(tenant.workspace.pk)) == 0
    again, _ = await started(tenant)
    await again.ws.disconnect()


# ---------------------------------------------------------------- another process


async def test_a_session_moves_when_another_process_resumes_it(tenant, llm):
    """The owner hands over: it finishes its turn, saves, and the resumer rebuilds it.

    "Another process" is simulated by hiding the host from this process's registry; the
    handover itself goes over the real channel layer.
    """
    llm.script(Text("Moving "), Delay(0.4), Text("along."), Finish("stop"), Done())
    llm.script(text_reply("I remember the move."))
    first, ready = await started(tenant)
    await first.send({"type": "text", "text": "First turn."})
    await first.until("thinking")
    last_seq = await drop(first)
    old = host_module._hosts.pop(ready["sessionId"])

    second = await resumed(tenant, ready, last_seq)
    await second.until("pong", timeout=15)
    assert [e["type"] for e in second.events][:3] == ["chat_delta", "chat_delta", "chat"]
    assert seqs(second.events) == list(range(last_seq + 1, last_seq + 1 + len(second.events)))
    new = resume.local_host(ready["sessionId"])
    assert new is not None and new is not old and new.channel != old.channel
    await second.send({"type": "text", "text": "Second turn."})
    await second.until("chat")
    roles = [(m["role"], m["content"]) for m in llm.requests[1].json["messages"]][1:]
    assert roles[:2] == [("user", "First turn."), ("assistant", "Moving along.")]
    assert (await record(ready["sessionId"])).ended_at is None
    await second.ws.disconnect()
    session = await record(ready["sessionId"])
    assert (session.turn_count, session.close_code) == (2, 1000)


# ---------------------------------------------------------------- snapshot and restore


async def test_a_restored_session_has_the_conversation_and_reports_a_lost_tool_call(make):
    from tests.engine.providers.fake import FakeLLM, FakeToolRunner
    from tests.engine.providers.fake import tool_call as fake_tool_call

    slow = [ToolDefinition(name="slow", handler="async () => 1")]
    old = make(
        llm=FakeLLM(script=["Hello Bo.", [fake_tool_call("slow", {}, id="c9")]]),
        runner=FakeToolRunner(delay=5),
        tools=slow,
    )
    await old.session.start()
    await old.say("I am Bo.")
    await old.wait_for("chat")
    await old.say("Run the slow tool.")
    await old.wait_for("tool_status")
    snapshot = json.loads(json.dumps(old.session.snapshot()))  # as the store keeps it
    await old.session.close()  # the process dies with the tool still running

    new = make(
        llm=FakeLLM(script=["Sorry, it was interrupted."]), first_seq=snapshot["seq"], tools=slow
    )
    new.session.restore(snapshot)
    await new.session.resume()
    assert new.events[0] | {"ts": 0} == {
        "type": "tool_status", "callId": "c9", "name": "slow", "status": "failed",
        "seq": snapshot["seq"] + 1, "ts": 0,
    }  # fmt: skip
    await new.say("Did it work?")
    await new.wait_for("chat")
    sent = new.llm.requests[0].messages
    assert [(m["role"], m.get("content")) for m in sent[:2]] == [
        ("user", "I am Bo."),
        ("assistant", "Hello Bo."),
    ]
    tool_message = next(m for m in sent if m["role"] == "tool")
    assert "moved to another server" in json.loads(tool_message["content"])["error"]


# ---------------------------------------------------------------- the store


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def store(request):
    return MemoryResumeStore() if request.param == "memory" else RedisResumeStore()


async def test_store_keeps_state_and_events_and_forgets_them(store):
    sid = "f" * 32
    await store.create(sid, meta='{"tokenDigest": "d"}', state='{"seq": 0}', ttl=5)
    events = [(n, json.dumps({"type": "pong", "seq": n})) for n in (1, 2, 3)]
    await store.write(sid, events=events, state='{"seq": 3}', ttl=5)
    loaded = await store.load(sid)
    assert loaded is not None and loaded.state == {"seq": 3} and loaded.meta["tokenDigest"] == "d"
    assert [e["seq"] for e in await store.events_after(sid, 1)] == [2, 3]
    assert await store.claim(sid, owner="a", previous=None, owner_ttl=5)
    assert not await store.claim(sid, owner="b", previous=None, owner_ttl=5)
    assert await store.claim(sid, owner="b", previous="a", owner_ttl=5)
    assert await store.owner(sid) == "b"
    await store.expire(sid, 0.05)
    await asyncio.sleep(0.2)
    assert await store.load(sid) is None
    await store.delete(sid)
    assert await store.events_after(sid, 0) == []


def test_tokens_are_compared_by_digest():
    digest = resume.token_digest("secret-token")
    assert resume.token_matches("secret-token", digest)
    assert not resume.token_matches("secret-tokeN", digest)
    assert "secret-token" not in digest


@pytest.mark.redis
async def test_redis_holds_no_resume_token(tenant, llm):
    llm.script(text_reply("Noted."))
    first, ready = await started(tenant)
    await first.send({"type": "text", "text": "hello"})
    await first.until("chat")
    await drop(first)
    client = live.redis_client()
    keys = await client.keys(f"voice:resume:{{{ready['sessionId']}}}*")
    assert len(keys) == 4  # state, events, owner, history (no tool call: no call ids)
    dumped = b""
    for key in keys:
        kind = (await client.type(key)).decode()
        if kind == "hash":
            dumped += b"".join((await client.hgetall(key)).values())
        elif kind == "stream":
            dumped += b"".join(f[b"e"] for _id, f in await client.xrange(key))
        elif kind == "list":
            dumped += b"".join(await client.lrange(key, 0, -1))
        # Detached: every key expires within the resume TTL (not the attached TTL, which
        # adds the owner lease), whichever keys the writes since the last state touched.
        assert 0 < await client.pttl(key) <= settings.SESSION_RESUME_TTL * 1000
    assert b"hello" in dumped and ready["resumeToken"].encode() not in dumped
