"""System checks of the provider settings (``manage.py check``; daphne runs them at start).

sessions.E001  STT_PROVIDER, TTS_PROVIDER or TOOL_RUNNER names no provider
sessions.E002  it names a scripted fake, and ALLOW_FAKE_PROVIDERS is off
sessions.E003  a provider's own setting has a bad value (LOCAL_STT_END_SILENCE_MS=x)
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from engine.providers import registry

TAG = "providers"
_CHOSEN_BY: tuple[tuple[str, registry.Kind], ...] = (
    ("STT_PROVIDER", "stt"),
    ("TTS_PROVIDER", "tts"),
    ("TOOL_RUNNER", "tools"),
)


def _chosen(setting: str, kind: registry.Kind) -> list[checks.CheckMessage]:
    name = getattr(settings, setting)
    hint = f"use one of {', '.join(registry.names(kind, choosable=True))}"
    if name not in registry.names(kind):
        message = f"{setting}={name!r} names no provider"
        return [checks.Error(message, hint=hint, id="sessions.E001")]
    if registry.provider(kind, name).test_only and not settings.ALLOW_FAKE_PROVIDERS:
        return [
            checks.Error(
                f"{setting}={name!r} is a scripted provider for tests, refused while "
                "ALLOW_FAKE_PROVIDERS is off",
                hint=hint,
                id="sessions.E002",
            )
        ]
    return []


def _settings_values() -> list[checks.CheckMessage]:
    return [
        checks.Error(problem, id="sessions.E003")
        for kind in ("stt", "llm", "tts")
        for spec in registry.specs(kind)
        for problem in spec.problems()
    ]


def register() -> None:
    """Called by the app config: ``manage.py check`` (and migrate, runserver) run it."""
    checks.register(provider_settings, TAG)


def provider_settings(app_configs: Any = None, **_: Any) -> list[checks.CheckMessage]:
    errors = _settings_values()
    for setting, kind in _CHOSEN_BY:
        errors += _chosen(setting, kind)
    return errors


def refuse_bad_settings() -> None:
    """Stop a process that does not go through ``manage.py`` (daphne) on the same errors."""
    errors = [message for message in provider_settings() if message.is_serious()]
    if errors:
        raise ImproperlyConfigured("; ".join(str(message) for message in errors))
