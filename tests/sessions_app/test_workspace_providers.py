"""Each workspace's own provider credentials: two workspaces, two LLM servers, each
session reaches only its own, and a key never appears in a response, a page or a log."""

from __future__ import annotations

import json
import logging

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.urls import reverse

from core import leases as live
from engine.tools.call import ToolRequest
from realtime import resume
from secrets_app import crypto
from secrets_app import provider_credentials as credentials
from secrets_app.models import ProviderCredential, Secret
from secrets_app.services import secret_resolve
from sessions_app import services as agent_services
from sessions_app.provider_check import provider_check
from tests.conftest import api_client
from tests.engine.providers.llm.openai.fake_server import (
    FakeOpenAIServer,
    HttpError,
    Usage,
    text_reply,
)
from tests.engine.providers.tts.elevenlabs.fake_server import FakeElevenLabsServer
from tests.factories import Tenant, make_tenant
from tests.frontend.dashboard.conftest import logged_in
from tests.sessions_app.recording import ended_session
from tests.sessions_app.wsclient import Client
from tools_app.services import secret_bindings, tool_execute

pytestmark = pytest.mark.django_db(transaction=True)

KEY_A = "sk-workspace-a-7Qm2xV9pL4"
KEY_B = "sk-workspace-b-3Hd8rT1nW6"


@pytest.fixture(autouse=True)
def _local(settings):
    live._memory.clear()
    settings.LLM_BASE_URL = None  # no platform LLM: only the workspaces' own
    # The fake servers listen on loopback, as a developer's Ollama would.
    settings.DEV_ALLOW_PRIVATE_EGRESS = True


async def _connect(tenant: Tenant, server: FakeOpenAIServer, key: str, model: str) -> None:
    await sync_to_async(credentials.provider_llm_set)(
        workspace=tenant.workspace, name="primary", base_url=server.base_url, model=model,
        api_key=key,
    )  # fmt: skip


async def _talk(tenant: Tenant, text: str, agent: str = "") -> list[dict]:
    query = f"key={tenant.publishable_key}" + (f"&agent={agent}" if agent else "")
    async with Client(f"/v1/session?{query}") as client:
        await client.send({"type": "configure", "mode": "text"})
        await client.until("ready")
        await client.send({"type": "text", "text": text})
        await client.until("metrics")
        return client.events


def _dashboard_pages(tenant: Tenant, session_id: str) -> list[str]:
    client = logged_in(tenant)
    credential = ProviderCredential.objects.get(workspace=tenant.workspace)
    pages = [
        reverse("dashboard:providers", args=[tenant.workspace.pk]),
        reverse("dashboard:provider-llm", args=[tenant.workspace.pk, credential.pk]),
        reverse("dashboard:agents", args=[tenant.workspace.pk]),
        reverse("dashboard:session", args=[tenant.workspace.pk, session_id]),
        reverse("dashboard:usage", args=[tenant.workspace.pk]),
    ]
    texts = [client.get(page).content.decode() for page in pages]
    test = reverse("dashboard:provider-test", args=[tenant.workspace.pk, credential.pk])
    texts.append(client.post(test, follow=True).content.decode())
    return texts


async def test_two_workspaces_each_reach_only_their_own_llm_and_keys_never_show(caplog):
    caplog.set_level(logging.DEBUG)
    a = await sync_to_async(make_tenant)("a@example.com")
    b = await sync_to_async(make_tenant)("b@example.com")
    async with FakeOpenAIServer() as server_a, FakeOpenAIServer() as server_b:
        await _connect(a, server_a, KEY_A, "model-a")
        await _connect(b, server_b, KEY_B, "model-b")
        await sync_to_async(agent_services.agent_create)(
            workspace=b.workspace, name="Desk", slug="desk", llm_provider="primary"
        )
        server_a.script(text_reply("From A.", usage=Usage(3, 2)))
        server_b.script(text_reply("From B.", usage=Usage(4, 2)))
        events_a = await _talk(a, "hello a")
        events_b = await _talk(b, "hello b", agent="desk")
        server_a.script(text_reply("OK"))  # the dashboard's "Test connection"
        session = await ended_session(a.workspace)
        pages = await sync_to_async(_dashboard_pages)(a, str(session.public_id))

    assert [e["text"] for e in events_a if e["type"] == "chat"] == ["From A."]
    assert [e["text"] for e in events_b if e["type"] == "chat"] == ["From B."]
    assert [r.headers["authorization"] for r in server_a.requests] == [f"Bearer {KEY_A}"] * 2
    assert [r.headers["authorization"] for r in server_b.requests] == [f"Bearer {KEY_B}"]
    assert server_a.requests[0].json["model"] == "model-a"
    assert "hello b" not in str([r.body for r in server_a.requests])
    assert any("Connected: model model-a" in page for page in pages)

    api = api_client(a.secret_key)
    responses = [
        await sync_to_async(api.get)(path)
        for path in ("/api/v1/agents", f"/api/v1/sessions/{session.public_id}", "/api/v1/usage")
    ]
    seen = [json.dumps(events_a + events_b), *pages, *(r.content.decode() for r in responses)]
    seen.append(caplog.text)
    for key in (KEY_A, KEY_B):
        assert not [text for text in seen if key in text]
        assert not [r for r in caplog.records if key in r.getMessage()]


async def test_the_resume_store_never_holds_a_provider_key():
    tenant = await sync_to_async(make_tenant)("store@example.com")
    async with FakeOpenAIServer(default=text_reply("Hi.")) as server:
        await _connect(tenant, server, KEY_A, "m")
        async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
            await client.send({"type": "configure", "mode": "text"})
            ready = await client.until("ready")
            stored = await resume.resume_store().load(ready["sessionId"])
            assert stored is not None and stored.meta["llmConnection"] is None
            assert KEY_A not in json.dumps(stored.meta) + json.dumps(stored.state)


async def test_tool_code_cannot_reach_provider_keys():
    tenant = await sync_to_async(make_tenant)("tools@example.com")
    await sync_to_async(credentials.provider_speech_set)(
        workspace=tenant.workspace, kind="elevenlabs", api_key=KEY_A
    )
    assert await sync_to_async(secret_bindings)(workspace_id=tenant.workspace.pk) == []
    outcome = await tool_execute(
        ToolRequest(
            call_id="c1", workspace_id=tenant.workspace.pk, name="t", timeout_s=5, pinned=True,
            reads_secrets=True, arguments={},
            handler="async (a, ctx) => ({names: Object.keys(ctx.secrets), "
                    "eleven: String(ctx.secrets.ELEVENLABS), e2: String(ctx.secrets.elevenlabs)})",
        )
    )  # fmt: skip
    assert outcome.status == "completed"
    assert json.loads(outcome.result) == {"names": [], "eleven": "undefined", "e2": "undefined"}

    def copied_into_the_secrets_table() -> None:
        row = ProviderCredential.objects.get(workspace=tenant.workspace)
        secret = Secret(workspace=tenant.workspace, name="elevenlabs".upper(),
                        key_id=row.key_id, ciphertext=bytes(row.ciphertext))  # fmt: skip
        with pytest.raises(crypto.DecryptionError):
            secret_resolve(secret=secret)

    await sync_to_async(copied_into_the_secrets_table)()


async def test_an_agent_naming_a_connection_the_workspace_lacks_is_refused(llm):
    tenant = await sync_to_async(make_tenant)("lacks@example.com")
    with pytest.raises(ValidationError, match="no LLM connection named"):
        await sync_to_async(agent_services.agent_create)(
            workspace=tenant.workspace, name="X", slug="x", llm_provider="nope"
        )


# ---------------------------------------------------------------- public addresses only


def test_private_base_urls_are_refused_on_the_production_settings(db, settings):
    settings.DEV_ALLOW_PRIVATE_EGRESS = False
    tenant = make_tenant("private@example.com")
    for url in (
        "http://127.0.0.1:11434/v1",
        "http://localhost:11434/v1",
        "http://[::1]/v1",
        "http://169.254.169.254/latest",
        "http://2130706433/v1",
        "http://10.1.2.3/v1",
    ):
        with pytest.raises(ValidationError, match=r"is not a public address the platform can"):
            credentials.provider_llm_set(
                workspace=tenant.workspace, name="x", base_url=url, model="m"
            )
    with pytest.raises(ValidationError, match="user name or password"):
        credentials.provider_llm_set(
            workspace=tenant.workspace, name="x", base_url="https://u:p@api.example.com/v1",
            model="m",
        )  # fmt: skip


# ---------------------------------------------------------------- test connection


async def test_test_connection_reports_in_words_and_masks_the_key(caplog):
    caplog.set_level(logging.DEBUG)
    tenant = await sync_to_async(make_tenant)("check@example.com")
    async with FakeOpenAIServer() as server:
        await _connect(tenant, server, KEY_A, "gpt-test")
        row = await sync_to_async(ProviderCredential.objects.get)(workspace=tenant.workspace)
        server.script(text_reply("OK"))
        works = await sync_to_async(provider_check)(credential=row)
        server.script(HttpError(401, f"Incorrect API key provided: {KEY_A}."))
        refused = await sync_to_async(provider_check)(credential=row)
    assert works.ok and works.message.startswith("Connected: model gpt-test at 127.0.0.1 answered")
    assert "“OK”" in works.message
    assert not refused.ok
    assert refused.message == (
        "LLM (OpenAI-compatible) failed: LLM provider returned HTTP 401: "
        "Incorrect API key provided: [key]."
    )
    row = await sync_to_async(ProviderCredential.objects.get)(pk=row.pk)
    assert (row.check_ok, row.check_message) == (False, refused.message)
    assert KEY_A not in caplog.text


async def test_test_connection_of_a_speech_key(settings):
    tenant = await sync_to_async(make_tenant)("speech@example.com")
    async with FakeElevenLabsServer(api_key=KEY_B) as server:
        settings.ELEVENLABS_BASE_URL = server.url
        await sync_to_async(credentials.provider_speech_set)(
            workspace=tenant.workspace, kind="elevenlabs", api_key=KEY_B
        )
        row = await sync_to_async(ProviderCredential.objects.get)(workspace=tenant.workspace)
        works = await sync_to_async(provider_check)(credential=row)
        await sync_to_async(credentials.provider_speech_set)(
            workspace=tenant.workspace, kind="elevenlabs", api_key="xi-wrong"
        )
        row = await sync_to_async(ProviderCredential.objects.get)(workspace=tenant.workspace)
        wrong = await sync_to_async(provider_check)(credential=row)
    assert works.ok and "the voice spoke a test word" in works.message
    assert not wrong.ok and wrong.message.startswith("ElevenLabs text-to-speech failed:")


async def test_workspace_speech_key_replaces_the_platforms_in_a_session(settings):
    settings.ELEVENLABS_API_KEY = "platform-key-not-this-one"
    tenant = await sync_to_async(make_tenant)("voice@example.com")
    async with (
        FakeElevenLabsServer(api_key=KEY_B) as server,
        FakeOpenAIServer(default=text_reply("Hello there.")) as llm,
    ):
        settings.ELEVENLABS_BASE_URL = server.url
        await _connect(tenant, llm, None, "m")  # type: ignore[arg-type]
        await sync_to_async(credentials.provider_speech_set)(
            workspace=tenant.workspace, kind="elevenlabs", api_key=KEY_B
        )
        settings.TTS_PROVIDER = "elevenlabs"
        async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
            await client.send({"type": "configure", "mode": "voice"})
            await client.until("ready")
            await client.send({"type": "text", "text": "hi"})
            await client.until("tts_done", timeout=10)
            assert "error" not in client.types() and client.audio
    assert "authorization" not in llm.requests[0].headers  # that connection has no key


async def test_ready_says_when_the_workspace_has_no_llm_and_where_to_add_one(settings):
    settings.PUBLIC_URL = "https://voice.example.com"
    tenant = await sync_to_async(make_tenant)("nollm@example.com")
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "text"})
        ready = await client.until("ready")
    setup = f"https://voice.example.com/w/{tenant.workspace.pk}/providers/"
    assert ready["llm"] == "offline"
    assert ready["notice"]["setupUrl"] == setup
    assert ready["notice"]["message"].startswith("No language model is connected")
    assert setup in ready["notice"]["message"]
    async with FakeOpenAIServer(default=text_reply("Hi.")) as server:
        await _connect(tenant, server, KEY_A, "m")
        async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
            await client.send({"type": "configure", "mode": "text"})
            ready = await client.until("ready")
    assert ready["llm"] == "openai" and "notice" not in ready
