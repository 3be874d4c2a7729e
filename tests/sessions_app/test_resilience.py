"""Retries and fallbacks over the real consumer, with the agent's LLMs and TTS on local fake
servers: what a user hears (one answer, never two; the same error as before when nothing
answers) and what the turn's metrics and record say about who served it."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError

from core import leases as live
from engine import metrics
from engine.protocol import PROVIDER_FAILURES
from engine.providers.base import ProviderError
from engine.providers.resilience import (
    Attempts,
    ResilientLLM,
    ResilientSTT,
    ResilientTTS,
    RetryPolicy,
)
from secrets_app import provider_credentials as credentials
from sessions_app import services as agent_services
from sessions_app.models import TurnRecord
from tests.conftest import api_client
from tests.engine.providers.fake import FakeLLM, FakeSTT, FakeTTS
from tests.engine.providers.llm.openai.fake_server import (
    Cut,
    FakeOpenAIServer,
    HttpError,
    Text,
    text_reply,
)
from tests.engine.providers.tts.openai.fake_server import FakeOpenAISpeechServer
from tests.engine.providers.tts.orpheus.fake_server import FakeOrpheusServer
from tests.factories import Tenant, make_tenant
from tests.fakes.ws_server import Cut as CutAudio
from tests.sessions_app.recording import ended_session, recorded_errors
from tests.sessions_app.wsclient import Client

pytestmark = pytest.mark.django_db(transaction=True)

UNAVAILABLE = {"code": "llm_failed", "message": PROVIDER_FAILURES["llm_failed"]}


@pytest.fixture(autouse=True)
def _local(settings: Any) -> None:
    live._memory.clear()
    settings.LLM_BASE_URL = None  # only the workspaces' own connections
    settings.DEV_ALLOW_PRIVATE_EGRESS = True  # the fakes listen on loopback
    settings.PROVIDER_RETRY_DELAYS_MS = [200, 600]  # the default, stated


@pytest.fixture
async def primary() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def backup() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        yield server


def refused_url() -> str:
    """An address where nothing listens: connecting is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _agent(email: str, primary_url: str, backup_url: str | None) -> Tenant:
    tenant = make_tenant(email)
    for name, url, model in (
        ("primary", primary_url, "model-a"),
        ("backup", backup_url, "model-b"),
    ):
        if url is not None:
            credentials.provider_llm_set(
                workspace=tenant.workspace, name=name, base_url=url, model=model, api_key="sk-x"
            )
    agent_services.agent_create(
        workspace=tenant.workspace, name="Ada", slug="ada", llm_provider="primary",
        llm_fallbacks=[{"connection": "backup"}] if backup_url else [],
    )  # fmt: skip
    return tenant


async def _turn(tenant: Tenant, text: str = "hi") -> list[dict[str, Any]]:
    async with Client(f"/v1/session?key={tenant.publishable_key}&agent=ada") as client:
        await client.send({"type": "configure", "mode": "text"})
        await client.until("ready")
        await client.send({"type": "text", "text": text})
        await client.until("metrics", timeout=10)
        return client.events


def _only(events: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (event,) = [e for e in events if e["type"] == kind]
    return event


def _errors(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"code": e["code"], "message": e["message"]} for e in events if e["type"] == "error"]


def _counted(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


async def _recorded_llm_use() -> dict[str, Any]:
    session = await ended_session()
    record = await sync_to_async(TurnRecord.objects.get)(session=session)
    return record.metrics["llm"]


# ---------------------------------------------------------------- LLM


async def test_a_provider_answering_503_twice_is_retried_and_the_turn_says_so(primary):
    tenant = await sync_to_async(_agent)("retry@example.com", primary.base_url, None)
    primary.script(HttpError(503, "overloaded"))
    primary.script(HttpError(503, "overloaded"))
    primary.script(text_reply("Hello there."))
    started = time.monotonic()
    events = await _turn(tenant)
    assert _errors(events) == []
    assert _only(events, "chat")["text"] == "Hello there."
    use = {"provider": "primary:model-a", "retries": 2, "fallbackReason": None}
    assert _only(events, "metrics")["llm"] == use
    assert len(primary.requests) == 3
    assert time.monotonic() - started >= 0.8  # 200 ms, then 600 ms
    assert await _recorded_llm_use() == use


async def test_a_primary_that_is_down_is_replaced_by_the_fallback(backup):
    tenant = await sync_to_async(_agent)("down@example.com", refused_url(), backup.base_url)
    backup.script(text_reply("From the backup."))
    before = _counted("voice_provider_fallbacks_total", kind="llm", reason="unreachable")
    events = await _turn(tenant)
    assert _errors(events) == []
    assert _only(events, "chat")["text"] == "From the backup."
    use = {"provider": "backup:model-b", "retries": 2, "fallbackReason": "unreachable"}
    assert _only(events, "metrics")["llm"] == use
    assert backup.requests[0].json["model"] == "model-b"
    after = _counted("voice_provider_fallbacks_total", kind="llm", reason="unreachable")
    assert after == before + 1
    assert await _recorded_llm_use() == use
    # The record as the API shows it: which provider served the turn, and why.
    client = api_client(tenant.secret_key)
    session_id = uuid.UUID(hex=_only(events, "ready")["sessionId"])
    response = await sync_to_async(client.get)(f"/api/v1/sessions/{session_id}")
    (turn,) = response.json()["turns"]
    assert turn["llm"] == {
        "provider": "backup:model-b",
        "retries": 2,
        "fallback_reason": "unreachable",
    }


async def test_a_failure_after_the_first_token_is_not_retried(primary, backup):
    tenant = await sync_to_async(_agent)("midway@example.com", primary.base_url, backup.base_url)
    primary.script(Text("Hel"), Cut())
    events = await _turn(tenant)
    # The user saw "Hel": asking again (here or elsewhere) would say it twice.
    assert [e["text"] for e in events if e["type"] == "chat_delta"] == ["Hel"]
    assert _errors(events) == [UNAVAILABLE]
    detail = "the connection to the LLM provider broke"
    assert await recorded_errors(tenant.workspace) == [("llm_failed", detail)]
    assert len(primary.requests) == 1 and backup.requests == []
    metrics = _only(events, "metrics")
    assert metrics["outcome"] == "failed"
    assert metrics["llm"] == {"provider": "primary:model-a", "retries": 0, "fallbackReason": None}


async def test_a_rejected_key_goes_straight_to_the_fallback(primary, backup):
    tenant = await sync_to_async(_agent)("badkey@example.com", primary.base_url, backup.base_url)
    primary.script(HttpError(401, "Incorrect API key provided"))
    backup.script(text_reply("Backup here."))
    events = await _turn(tenant)
    assert _only(events, "chat")["text"] == "Backup here."
    assert len(primary.requests) == 1  # a retry cannot fix a key
    assert _only(events, "metrics")["llm"] == {
        "provider": "backup:model-b", "retries": 0, "fallbackReason": "auth_failed",
    }  # fmt: skip


async def test_when_every_provider_is_down_the_user_gets_todays_error(settings):
    alone = await sync_to_async(_agent)("alone@example.com", refused_url(), None)
    primary_url = refused_url()
    both = await sync_to_async(_agent)("both@example.com", primary_url, refused_url())
    settings.PROVIDER_RETRY_DELAYS_MS = []
    without_fallback, with_fallback = await _turn(alone), await _turn(both)
    assert _errors(with_fallback) == _errors(without_fallback) == [UNAVAILABLE]
    # The dashboard's detail names the address that did not answer (the page's does not).
    down = f"could not connect to {urlsplit(primary_url).netloc}"
    assert await recorded_errors(both.workspace) == [("llm_failed", down)]
    assert "127.0.0.1" not in str(_errors(with_fallback))
    metrics = _only(with_fallback, "metrics")
    assert metrics["outcome"] == "failed"
    assert metrics["llm"] == {"provider": None, "retries": 0, "fallbackReason": "unreachable"}


async def test_a_session_on_a_failing_provider_does_not_slow_a_healthy_one(primary, backup):
    failing = await sync_to_async(_agent)("failing@example.com", refused_url(), refused_url())
    healthy = await sync_to_async(_agent)("healthy@example.com", primary.base_url, None)
    primary.script(text_reply("All good."))
    finished: dict[str, float] = {}

    async def run(name: str, tenant: Tenant) -> list[dict[str, Any]]:
        events = await _turn(tenant)
        finished[name] = time.monotonic()
        return events

    failed_events, healthy_events = await asyncio.gather(
        run("failing", failing), run("healthy", healthy)
    )
    assert _errors(healthy_events) == []
    assert _only(healthy_events, "chat")["text"] == "All good."
    metrics = _only(healthy_events, "metrics")
    assert metrics["llm"] == {"provider": "primary:model-a", "retries": 0, "fallbackReason": None}
    # The failing one spent 2 × 0.8 s in backoff; the healthy one never waited for it.
    assert metrics["turnMs"] < 700
    assert finished["healthy"] < finished["failing"]
    assert _errors(failed_events) == [UNAVAILABLE]
    assert _only(failed_events, "metrics")["llm"]["retries"] == 4


# ---------------------------------------------------------------- TTS


@pytest.fixture
async def speech(settings: Any) -> AsyncIterator[tuple[FakeOpenAISpeechServer, FakeOrpheusServer]]:
    async with (
        FakeOpenAISpeechServer(api_key="sk-tts") as openai,
        FakeOrpheusServer(api_key="orpheus-key") as orpheus,
    ):
        settings.OPENAI_API_KEY, settings.OPENAI_TTS_BASE_URL = "sk-tts", openai.base_url
        settings.ORPHEUS_URL, settings.ORPHEUS_API_KEY = orpheus.url, "orpheus-key"
        settings.TTS_TIMEOUT_S = 2.0
        yield openai, orpheus


async def _spoken(tenant: Tenant, llm: FakeOpenAIServer) -> tuple[list[dict[str, Any]], int]:
    llm.script(text_reply("Hello there."))
    async with Client(f"/v1/session?key={tenant.publishable_key}&agent=voice") as client:
        await client.send({"type": "configure", "mode": "voice"})
        await client.until("ready")
        await client.send({"type": "text", "text": "hi"})
        await client.until("metrics", timeout=10)
        return client.events, sum(len(frame) for frame in client.audio)


def _voice_agent(email: str, llm_url: str) -> Tenant:
    tenant = make_tenant(email)
    credentials.provider_llm_set(
        workspace=tenant.workspace, name="primary", base_url=llm_url, model="m", api_key="k"
    )
    agent_services.agent_create(
        workspace=tenant.workspace, name="Voice", slug="voice", tts_provider="openai",
        tts_fallbacks=["orpheus"],
    )  # fmt: skip
    return tenant


async def test_a_failing_tts_is_replaced_by_the_agents_fallback(primary, speech):
    openai, orpheus = speech
    tenant = await sync_to_async(_voice_agent)("tts@example.com", primary.base_url)
    openai.inject(HttpError(503), HttpError(503), HttpError(503))
    events, audio_bytes = await _spoken(tenant, primary)
    assert _errors(events) == []
    assert audio_bytes > 0
    assert len(openai.requests) == 3 and len(orpheus.connections) == 1
    assert _only(events, "metrics")["tts"] == {
        "provider": "orpheus", "retries": 2, "fallbackReason": "server_error",
    }  # fmt: skip


async def test_tts_failing_after_its_first_audio_is_not_repeated(primary, speech):
    openai, orpheus = speech
    tenant = await sync_to_async(_voice_agent)("ttscut@example.com", primary.base_url)
    openai.inject(CutAudio(after_frames=2))
    events, audio_bytes = await _spoken(tenant, primary)
    assert audio_bytes > 0
    assert [e["code"] for e in _errors(events)] == ["tts_failed"]
    assert orpheus.connections == [] and len(openai.requests) == 1
    assert _only(events, "metrics")["tts"]["provider"] == "openai"


# ---------------------------------------------------------------- agent settings


async def test_fallbacks_must_be_providers_the_workspace_can_use(primary, speech):
    tenant = await sync_to_async(make_tenant)("settings@example.com")
    create = sync_to_async(agent_services.agent_create)
    for fields, message in (
        ({"llm_fallbacks": [{"connection": "nope"}]}, "no LLM connection named 'nope'"),
        ({"llm_fallbacks": [{"model": "x"}]}, "no LLM connection to fall back to"),
        ({"tts_fallbacks": ["fake"]}, "not a text-to-speech provider"),
        ({"tts_fallbacks": ["local", "local"]}, "an earlier fallback"),
    ):
        with pytest.raises(ValidationError, match=message):
            await create(workspace=tenant.workspace, name="X", slug="x", **fields)
    client = api_client(tenant.secret_key)
    post = sync_to_async(client.post)
    refused = await post(
        "/api/v1/agents", {"name": "X", "slug": "x", "tts_fallbacks": ["fake"]}, format="json"
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"] == {
        "tts_fallbacks.0": ['"fake" is not a valid choice.']
    }
    await sync_to_async(credentials.provider_llm_set)(
        workspace=tenant.workspace, name="spare", base_url=primary.base_url, model="m",
        api_key="k",
    )  # fmt: skip
    body = {
        "name": "X", "slug": "x", "tts_provider": "openai",
        "llm_fallbacks": [{"connection": "spare", "model": "small"}, {"model": "other"}],
        "tts_fallbacks": ["orpheus", "local"],
    }  # fmt: skip
    created = await post("/api/v1/agents", body, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["llm_fallbacks"] == [
        {"connection": "spare", "model": "small"}, {"connection": "", "model": "other"},
    ]  # fmt: skip
    assert created.json()["tts_fallbacks"] == ["orpheus", "local"]
    outsider = await sync_to_async(make_tenant)("outsider@example.com")
    seen = await sync_to_async(api_client(outsider.secret_key).get)("/api/v1/agents/x")
    assert seen.status_code == 404


# ---------------------------------------------------------------- the wrapper on its own


async def test_a_fallback_tts_at_another_sample_rate_is_left_out_and_voices_are_its_own():
    failing = FakeTTS(error=ProviderError("down", code="tts_failed", reason="unreachable"))
    other_rate = FakeTTS(sample_rate=16_000)
    fitting = FakeTTS(voices=("tara", "leo"))
    tts = ResilientTTS([("a", failing), ("b", other_rate), ("c", fitting)])
    assert tts.labels == ["a", "c"]
    reports: list[Attempts] = []
    audio = [chunk async for chunk in tts.synthesize("Hi.", voice="jess", report=reports.append)]
    assert audio and other_rate.requests == []
    assert fitting.requests == [("Hi.", None)]  # no "jess" there: its own default voice
    assert reports == [Attempts("c", 0, "unreachable")]
    _ = [chunk async for chunk in tts.synthesize("Hi.", voice="leo")]
    assert fitting.requests[-1] == ("Hi.", "leo")


async def test_a_fallback_llm_without_tools_serves_no_round_that_offers_them():
    from engine.providers.base import ToolSpec
    from engine.providers.llm.offline.adapter import OfflineLLM

    down = ProviderError("down", code="llm_failed", reason="unreachable")
    llm = ResilientLLM([("primary", FakeLLM(script=[[down], [down]])), ("offline", OfflineLLM())])
    spec = ToolSpec("lookup", "", {"type": "object", "properties": {}})
    messages = [{"role": "user", "content": "x"}]
    reports: list[Attempts] = []
    with pytest.raises(ProviderError):
        _ = [e async for e in llm.stream(messages=messages, tools=[spec], report=reports.append)]
    served = [e async for e in llm.stream(messages=messages, tools=[], report=reports.append)]
    assert served
    assert reports == [Attempts(None, 0, "unreachable"), Attempts("offline", 0, "unreachable")]


async def test_opening_a_recogniser_is_retried_when_a_retry_can_help():
    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)

    flaky = FakeSTT(open_error=ProviderError("busy", code="stt_failed", retryable=True))
    stt = ResilientSTT(flaky, policy=RetryPolicy.from_ms([200, 600]), sleep=pause)
    with pytest.raises(ProviderError):
        await stt.open(sample_rate=16_000)
    assert pauses == [0.2, 0.6]
    flaky.open_error = ProviderError("bad key", code="stt_failed", retryable=False)
    pauses.clear()
    with pytest.raises(ProviderError, match="bad key"):
        await stt.open(sample_rate=16_000)
    assert pauses == []
    flaky.open_error = None
    assert await stt.open(sample_rate=16_000) is flaky.streams[-1]
