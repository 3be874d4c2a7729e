"""Attack (issue 21, item 2), now a regression: a provider that answers 401 quoting the key
(OpenAI does: ``Incorrect API key provided: sk-…``) put the workspace's own LLM key in the
``llm_failed`` error sent to the anonymous page.

Now a provider's failure reaches the page as its code and a fixed sentence; its words go,
through the session's one scrubber (every key and secret the session uses, in every
spelling), to the session's record and its dashboard page. Over the real consumer, with
the providers' fakes speaking their real error shapes.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any
from urllib.parse import quote

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse

from engine.protocol import PROVIDER_FAILURES
from secrets_app import provider_credentials as credentials
from secrets_app import services as secret_services
from sessions_app.models import SessionError
from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer, HttpError, text_reply
from tests.engine.providers.stt.assemblyai.fake_server import FakeAssemblyAIServer
from tests.engine.providers.tts.openai.fake_server import FakeOpenAISpeechServer
from tests.factories import Tenant, make_tenant
from tests.frontend.dashboard.conftest import logged_in
from tests.sessions_app.recording import ended_session, recorded_errors
from tests.sessions_app.wsclient import Client

pytestmark = pytest.mark.django_db(transaction=True)

WORKSPACE_KEY = "sk-live-Wk7Qm2xV9pL4/Zr+8Hd3="
PLATFORM_KEY = "sk-platform-3Hd8rT1nW6Yq5"
SECRET = "crm-token-9f8e7d6c5b4a"


def _incorrect_key(key: str) -> HttpError:
    """OpenAI's own answer to a wrong key, its JSON shape and words, the key quoted whole."""
    return HttpError(
        401,
        f"Incorrect API key provided: {key}. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        type="invalid_request_error",
        code="invalid_api_key",
    )


@pytest.fixture(autouse=True)
def _local(settings: Any, http_pools_closed: None) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = True  # the fakes listen on loopback
    settings.LLM_BASE_URL = None
    settings.PROVIDER_RETRY_DELAYS_MS = []


async def _tenant(email: str) -> Tenant:
    tenant = await sync_to_async(make_tenant)(email)
    await sync_to_async(secret_services.secret_set)(
        workspace=tenant.workspace, name="CRM_TOKEN", value=SECRET, allowed_hosts=["crm.test"]
    )
    return tenant


async def _turn(tenant: Tenant, mode: str = "text") -> list[dict[str, Any]]:
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": mode})
        await client.until("ready")
        await client.send({"type": "text", "text": "hello"})
        await client.until("metrics", timeout=15)
        return client.events


def _session_page(tenant: Tenant, session_id: str) -> str:
    page = reverse("dashboard:session", args=[tenant.workspace.pk, session_id])
    return logged_in(tenant).get(page).content.decode()


def _nothing_of(texts: list[str], *values: str) -> None:
    for value in values:
        spellings = {value, quote(value, safe=""), base64.b64encode(value.encode()).decode()}
        assert not [text for text in texts if any(s in text for s in spellings)]


async def test_an_llm_quoting_the_workspace_key_never_shows_it(caplog) -> None:
    caplog.set_level(logging.DEBUG)
    tenant = await _tenant("llm401@example.com")
    async with FakeOpenAIServer() as llm:
        await sync_to_async(credentials.provider_llm_set)(
            workspace=tenant.workspace, name="mine", base_url=llm.base_url, model="m",
            api_key=WORKSPACE_KEY,
        )  # fmt: skip
        llm.script(_incorrect_key(WORKSPACE_KEY))
        events = await _turn(tenant)
    assert llm.requests[0].headers["authorization"] == f"Bearer {WORKSPACE_KEY}"
    errors = [e for e in events if e["type"] == "error"]
    assert [(e["code"], e["message"]) for e in errors] == [
        ("llm_failed", PROVIDER_FAILURES["llm_failed"])
    ]
    ((code, detail),) = await recorded_errors(tenant.workspace)
    assert code == "llm_failed"
    assert detail == (
        "LLM provider returned HTTP 401: Incorrect API key provided: [key]. You can find your "
        "API key at https://platform.openai.com/account/api-keys."
    )
    session = await ended_session(tenant.workspace)
    page = await sync_to_async(_session_page)(tenant, session.public_id.hex)
    assert "Provider errors" in page and "Incorrect API key provided: [key]." in page
    _nothing_of([json.dumps(events), detail, page, caplog.text], WORKSPACE_KEY)


async def test_the_platforms_key_and_the_workspaces_secrets_are_masked_too(settings) -> None:
    tenant = await _tenant("platform401@example.com")
    echoed = (
        f"Incorrect API key provided: {PLATFORM_KEY}; the request also carried "
        f"{base64.b64encode(SECRET.encode()).decode()} and {quote(WORKSPACE_KEY, safe='')}"
    )
    async with FakeOpenAIServer() as llm:
        settings.LLM_BASE_URL, settings.LLM_API_KEY = llm.base_url, PLATFORM_KEY
        await sync_to_async(credentials.provider_speech_set)(
            workspace=tenant.workspace, kind="elevenlabs", api_key=WORKSPACE_KEY
        )
        llm.script(HttpError(401, echoed, type="invalid_request_error", code="invalid_api_key"))
        events = await _turn(tenant)
    ((_code, detail),) = await recorded_errors(tenant.workspace)
    assert detail.startswith(
        "LLM provider returned HTTP 401: Incorrect API key provided: [key]; the request also "
        "carried [secret CRM_TOKEN]"
    )  # what is left of the base64 (its last, padded character) tells nothing
    assert detail.endswith(" and [key]")
    _nothing_of([json.dumps(events), detail], PLATFORM_KEY, SECRET, WORKSPACE_KEY)


async def test_a_voice_quoting_the_key_never_shows_it(settings) -> None:
    tenant = await _tenant("tts401@example.com")
    async with (
        FakeOpenAIServer() as llm,
        FakeOpenAISpeechServer(api_key=WORKSPACE_KEY) as voice,
    ):
        llm.script(text_reply("Hello there."))
        llm.script(text_reply("Again."))
        await sync_to_async(credentials.provider_llm_set)(
            workspace=tenant.workspace, name="mine", base_url=llm.base_url, model="m"
        )
        await sync_to_async(credentials.provider_speech_set)(
            workspace=tenant.workspace, kind="openai", api_key=WORKSPACE_KEY
        )
        settings.TTS_PROVIDER, settings.OPENAI_TTS_BASE_URL = "openai", voice.base_url
        settings.OPENAI_API_KEY = PLATFORM_KEY  # the workspace's own key wins, and is used
        voice.inject(_incorrect_key(WORKSPACE_KEY))
        voice.inject(HttpError(400, f"Invalid value for 'input': {quote(WORKSPACE_KEY)}"))
        first, second = await _turn(tenant, "voice"), await _turn(tenant, "voice")
    assert voice.requests[0].headers["authorization"] == f"Bearer {WORKSPACE_KEY}"
    for events in (first, second):
        errors = [(e["code"], e["message"]) for e in events if e["type"] == "error"]
        assert errors == [("tts_failed", PROVIDER_FAILURES["tts_failed"])]
    details = [detail for _code, detail in await _all_recorded_errors(tenant)]
    assert details[0] == "OpenAI rejected the API key (HTTP 401); check OPENAI_API_KEY"
    assert details[1] == "OpenAI returned HTTP 400: Invalid value for 'input': [key]"
    _nothing_of([json.dumps(first + second), *details], WORKSPACE_KEY)


async def _all_recorded_errors(tenant: Tenant) -> list[tuple[str, str]]:
    """Every session's, in order (the record is written after the session ends)."""
    await ended_session(tenant.workspace)
    rows = SessionError.objects.filter(session__workspace=tenant.workspace).order_by("pk")
    return await sync_to_async(lambda: [(row.code, row.detail) for row in rows])()


async def test_speech_recognition_quoting_the_key_never_shows_it(settings) -> None:
    tenant = await _tenant("stt401@example.com")
    async with FakeOpenAIServer() as llm, FakeAssemblyAIServer(api_key=WORKSPACE_KEY) as stt:
        await sync_to_async(credentials.provider_llm_set)(
            workspace=tenant.workspace, name="mine", base_url=llm.base_url, model="m"
        )
        await sync_to_async(credentials.provider_speech_set)(
            workspace=tenant.workspace, kind="assemblyai", api_key=WORKSPACE_KEY
        )
        settings.STT_PROVIDER, settings.ASSEMBLYAI_BASE_URL = "assemblyai", stt.base_url
        stt.fail_tokens(401, f"Invalid API key: {json.dumps(WORKSPACE_KEY)[1:-1]} (hex "
                             f"{WORKSPACE_KEY.encode().hex()})")  # fmt: skip
        async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
            await client.send({"type": "configure", "mode": "voice"})
            await client.until("ready")
            error = await client.until("error")
        events = client.events
    assert (error["code"], error["message"]) == ("stt_failed", PROVIDER_FAILURES["stt_failed"])
    ((code, detail),) = await recorded_errors(tenant.workspace)
    assert code == "stt_failed" and detail.startswith("AssemblyAI refused the API key (HTTP 401)")
    assert "[key]" in detail or "[redacted]" in detail
    _nothing_of([json.dumps(events), detail], WORKSPACE_KEY)
    assert WORKSPACE_KEY.encode().hex() not in detail
