"""The registry maps names to the providers' own modules; the system checks read them."""

from __future__ import annotations

import importlib

from django.core import checks

from engine.providers import registry
from sessions_app.checks import provider_settings

LABELS = {
    ("stt", "local"): "Local (offline)",
    ("stt", "assemblyai"): "AssemblyAI",
    ("tts", "local"): "Local (offline)",
    ("tts", "orpheus"): "Orpheus",
    ("tts", "elevenlabs"): "ElevenLabs",
    ("tts", "openai"): "OpenAI",
}
LABELS_STT = [name for kind, name in LABELS if kind == "stt"]
LABELS_TTS = [name for kind, name in LABELS if kind == "tts"]


def test_each_provider_says_its_own_label_name_and_kind():
    for (kind, name), label in LABELS.items():
        spec = registry.provider(kind, name)
        assert (spec.kind, spec.name, spec.label) == (kind, name, label)
        module = importlib.import_module(spec.adapter.__module__)
        assert module.PROVIDER is spec  # declared beside its adapter, not in the registry


def test_the_scripted_fakes_are_offered_only_where_allowed(settings):
    assert "fake" in registry.names("stt", choosable=True)  # the tests allow them
    settings.ALLOW_FAKE_PROVIDERS = False
    # (Other tests register scripted adapters of their own: only the platform's are listed.)
    for kind, platform in (("stt", LABELS_STT), ("tts", LABELS_TTS)):
        offered = registry.names(kind, choosable=True)
        assert "fake" not in offered and set(platform) <= set(offered)
        assert "fake" in registry.names(kind)  # still known, so the check can say why


def test_the_system_check_refuses_unknown_and_fake_providers(settings):
    assert provider_settings() == []  # the tests' fakes, allowed
    settings.ALLOW_FAKE_PROVIDERS = False
    settings.TOOL_RUNNER = "sandbox"
    settings.STT_PROVIDER, settings.TTS_PROVIDER = "whisperer", "fake"
    errors = {error.id: error for error in provider_settings()}
    assert set(errors) == {"sessions.E001", "sessions.E002"}
    assert "STT_PROVIDER='whisperer'" in errors["sessions.E001"].msg
    assert errors["sessions.E001"].hint.startswith("use one of assemblyai, local")
    assert "fake" not in errors["sessions.E002"].hint
    assert "TTS_PROVIDER='fake'" in errors["sessions.E002"].msg
    assert all(error.level == checks.ERROR for error in errors.values())


def test_a_providers_bad_setting_fails_the_check_naming_it(monkeypatch):
    monkeypatch.setenv("LOCAL_STT_END_SILENCE_MS", "5")
    monkeypatch.setenv("ELEVENLABS_API_KEY_FILE", "/nonexistent/key")
    errors = provider_settings()
    assert [error.id for error in errors] == ["sessions.E003", "sessions.E003"]
    assert "LOCAL_STT_END_SILENCE_MS must be at least 150" in errors[0].msg
    assert "ELEVENLABS_API_KEY_FILE: cannot read /nonexistent/key" in errors[1].msg


def test_a_workspace_key_replaces_the_platforms_for_that_provider_only(settings):
    settings.ORPHEUS_URL, settings.ORPHEUS_API_KEY = "wss://platform.example", "platform-key"
    spec = registry.provider("tts", "orpheus")
    assert spec.options()["url"] == "wss://platform.example" and spec.platform_account()
    settings.ORPHEUS_API_KEY = ""
    assert not spec.platform_account()
