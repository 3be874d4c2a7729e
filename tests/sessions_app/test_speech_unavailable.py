"""A voice session on a process whose offline speech model failed to load is refused in
words (never run deaf); the operator's detail stays in the log and /healthz."""

from __future__ import annotations

from typing import Any

import pytest

from engine.providers.stt.local import adapter as local_stt
from engine.providers.tts.local import adapter as local_tts
from tests.factories import Tenant, make_tenant
from tests.sessions_app.wsclient import Client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_leases")]


@pytest.fixture
def tenant(db: None) -> Tenant:
    return make_tenant("deaf@example.com")


async def _configure(tenant: Tenant, mode: str) -> tuple[int | None, dict[str, Any]]:
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": mode, "instructions": "Be brief."})
        event = await client.next()
        if event["type"] == "ready":
            return None, event
        return await client.closed(), event


async def test_a_voice_session_is_refused_when_the_speech_model_failed(
    tenant: Tenant, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.STT_PROVIDER = "local"
    failure = "the offline speech model could not be loaded (install faster-whisper)"
    monkeypatch.setattr(local_stt, "models_failed", lambda: [failure])
    code, error = await _configure(tenant, "voice")
    assert (code, error["code"]) == (4503, "service_unavailable")
    assert "cannot recognise speech" in error["message"]
    assert "install" not in error["message"]
    # A text session needs no speech: it starts.
    code, ready = await _configure(tenant, "text")
    assert (code, ready["type"]) == (None, "ready")


async def test_a_voice_session_is_refused_when_the_offline_voice_failed(
    tenant: Tenant, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.TTS_PROVIDER = "local"
    monkeypatch.setattr(local_tts.LocalTTS, "unavailable", classmethod(lambda cls: "piper"))
    code, error = await _configure(tenant, "voice")
    assert (code, error["code"]) == (4503, "service_unavailable")
    assert "cannot speak" in error["message"]
