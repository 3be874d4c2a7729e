"""Providers by kind and name, imported lazily from dotted paths."""

from __future__ import annotations

import importlib
from typing import Any, Literal

Kind = Literal["stt", "llm", "tts", "tools"]

_REGISTRY: dict[Kind, dict[str, str]] = {
    "stt": {
        "fake": "sessions_app.providers.fake.FakeSTT",
        "local": "sessions_app.providers.stt_local.LocalSTT",
        "assemblyai": "sessions_app.providers.stt_assemblyai.AssemblyAISTT",
    },
    "llm": {
        "fake": "sessions_app.providers.fake.FakeLLM",
        "openai": "sessions_app.providers.llm_openai.OpenAICompatibleLLM",
        "offline": "sessions_app.providers.llm_offline.OfflineLLM",
    },
    "tts": {
        "fake": "sessions_app.providers.fake.FakeTTS",
        "local": "sessions_app.providers.tts_local.LocalTTS",
        "orpheus": "sessions_app.providers.tts_orpheus.OrpheusTTS",
        "elevenlabs": "sessions_app.providers.tts_elevenlabs.ElevenLabsTTS",
        "openai": "sessions_app.providers.tts_openai.OpenAITTS",
    },
    "tools": {
        "fake": "sessions_app.providers.fake.FakeToolRunner",
        "sandbox": "tools_app.runner.SandboxToolRunner",
        "unavailable": "sessions_app.providers.tools_unavailable.UnavailableToolRunner",
    },
}


class UnknownProvider(LookupError):
    pass


def register(kind: Kind, name: str, dotted_path: str) -> None:
    _REGISTRY[kind][name] = dotted_path


def names(kind: Kind) -> list[str]:
    return sorted(_REGISTRY[kind])


def provider_class(kind: Kind, name: str) -> type[Any]:
    try:
        dotted = _REGISTRY[kind][name]
    except KeyError:
        raise UnknownProvider(f"no {kind} provider named {name!r}") from None
    module_name, _, attr = dotted.rpartition(".")
    provider: type[Any] = getattr(importlib.import_module(module_name), attr)
    return provider


def create(kind: Kind, name: str, **options: Any) -> Any:
    return provider_class(kind, name)(**options)
