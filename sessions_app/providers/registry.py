"""Providers by kind and name: each name maps to the ``ProviderSpec`` its own module
declares (a dotted path, imported lazily). Adding a provider is its module and one line
here; its label, settings, defaults and capabilities live in the module."""

from __future__ import annotations

import importlib
from typing import Any

from django.conf import settings

from sessions_app.providers.spec import Kind, ProviderSpec, adapter_spec

__all__ = [
    "SPEECH_FIELDS",
    "Kind",
    "UnknownProvider",
    "choosable",
    "create",
    "names",
    "platform_names",
    "provider",
    "specs",
]

# An agent's speech provider fields and the kind each names.
SPEECH_FIELDS: tuple[tuple[str, Kind], ...] = (("stt_provider", "stt"), ("tts_provider", "tts"))

_REGISTRY: dict[Kind, dict[str, str]] = {
    "stt": {
        "fake": "sessions_app.providers.fake.FAKE_STT",
        "local": "sessions_app.providers.stt_local.PROVIDER",
        "assemblyai": "sessions_app.providers.stt_assemblyai.PROVIDER",
    },
    "llm": {
        "fake": "sessions_app.providers.fake.FAKE_LLM",
        "openai": "sessions_app.providers.llm_openai.PROVIDER",
        "offline": "sessions_app.providers.llm_offline.PROVIDER",
    },
    "tts": {
        "fake": "sessions_app.providers.fake.FAKE_TTS",
        "local": "sessions_app.providers.tts_local.PROVIDER",
        "orpheus": "sessions_app.providers.tts_orpheus.PROVIDER",
        "elevenlabs": "sessions_app.providers.tts_elevenlabs.PROVIDER",
        "openai": "sessions_app.providers.tts_openai.PROVIDER",
    },
    "tools": {
        "fake": "sessions_app.providers.fake.FAKE_TOOLS",
        "sandbox": "tools_app.runner.PROVIDER",
        "unavailable": "sessions_app.providers.tools_unavailable.PROVIDER",
    },
}


class UnknownProvider(LookupError):
    pass


def register(kind: Kind, name: str, dotted_path: str) -> None:
    """``dotted_path``: a ``ProviderSpec``, or a bare adapter class (tests)."""
    _REGISTRY[kind][name] = dotted_path


def names(kind: Kind, *, choosable: bool = False) -> list[str]:
    """Every name of ``kind``; ``choosable``: only those this platform lets settings and
    agents choose (the scripted fakes only where ``ALLOW_FAKE_PROVIDERS`` is on)."""
    if not choosable or settings.ALLOW_FAKE_PROVIDERS:
        return sorted(_REGISTRY[kind])
    return platform_names(kind)


def platform_names(kind: Kind) -> list[str]:
    """Every name of ``kind`` but the scripted test-only ones, whatever the settings say
    (what an agent's fallbacks may name, tests included)."""
    return [name for name in sorted(_REGISTRY[kind]) if not provider(kind, name).test_only]


def specs(kind: Kind, *, choosable: bool = False) -> list[ProviderSpec]:
    return [provider(kind, name) for name in names(kind, choosable=choosable)]


def provider(kind: Kind, name: str) -> ProviderSpec:
    try:
        dotted = _REGISTRY[kind][name]
    except KeyError:
        raise UnknownProvider(f"no {kind} provider named {name!r}") from None
    module_name, _, attr = dotted.rpartition(".")
    found = getattr(importlib.import_module(module_name), attr)
    return found if isinstance(found, ProviderSpec) else adapter_spec(kind, name, found)


def choosable(kind: Kind, name: str) -> ProviderSpec:
    """``provider``, refusing a scripted fake unless ``ALLOW_FAKE_PROVIDERS`` is on."""
    spec = provider(kind, name)
    if spec.test_only and not settings.ALLOW_FAKE_PROVIDERS:
        raise UnknownProvider(
            f"{kind} provider {name!r} is for tests only (ALLOW_FAKE_PROVIDERS is off)"
        )
    return spec


def provider_class(kind: Kind, name: str) -> type[Any]:
    return provider(kind, name).adapter


def create(kind: Kind, name: str, **options: Any) -> Any:
    return provider_class(kind, name)(**options)
