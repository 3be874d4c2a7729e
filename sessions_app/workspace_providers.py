"""Which provider a session talks to, on whose account.

A workspace's own connections win (``secrets_app.provider_credentials``): the LLM an
agent names, else the workspace's default LLM connection, and a speech provider's key
when the workspace set one. The platform's environment (``LLM_BASE_URL``,
``ASSEMBLYAI_API_KEY``…) is the fallback for whatever the workspace did not set. With
neither, the LLM is the offline stand-in, and the session says how to connect one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.urls import reverse

from secrets_app.provider_credentials import LLMConnection, WorkspaceProviders
from sessions_app.providers import registry
from sessions_app.providers.base import LLM

OFFLINE = "offline"


class UnknownConnection(LookupError):
    """An agent names an LLM connection its workspace does not have (any more)."""


def openai_llm(connection: LLMConnection, *, model: str | None = None) -> LLM:
    """The adapter for a workspace's connection: its address is the customer's, so it
    connects only to public addresses (``public_only``), as tool fetches do."""
    llm: LLM = registry.create(
        "llm",
        "openai",
        base_url=connection.base_url,
        api_key=connection.api_key,
        model=model or connection.model,
        timeout_s=settings.LLM_TIMEOUT_S,
        public_only=True,
    )
    return llm


def llm_for(
    providers: WorkspaceProviders, *, connection: str | None, model: str | None
) -> tuple[LLM, str]:
    """(the LLM, its label for ``ready.llm``: ``openai`` or ``offline``)."""
    chosen = providers.llm(connection)
    if connection and chosen is None:
        raise UnknownConnection(connection)
    if chosen is not None:
        return openai_llm(chosen, model=model), "openai"
    if settings.LLM_BASE_URL:
        llm = registry.create(
            "llm",
            "openai",
            base_url=settings.LLM_BASE_URL,
            api_key=settings.LLM_API_KEY,
            model=model or settings.LLM_MODEL,
            timeout_s=settings.LLM_TIMEOUT_S,
        )
        return llm, "openai"
    return registry.create("llm", OFFLINE), OFFLINE


def llm_label(providers: WorkspaceProviders, *, connection: str | None, model: str | None) -> str:
    """How metrics and records name the LLM ``llm_for`` gives: ``connection:model``, the
    platform's as ``platform:model``, or ``offline``."""
    chosen = providers.llm(connection)
    if chosen is not None:
        return f"{chosen.name}:{model or chosen.model}"
    if settings.LLM_BASE_URL:
        return f"platform:{model or settings.LLM_MODEL}"
    return OFFLINE


def has_llm(providers: WorkspaceProviders) -> bool:
    return bool(providers.llms or settings.LLM_BASE_URL)


def setup_url(workspace_id: int) -> str:
    """The dashboard page where a workspace connects its providers."""
    path = reverse("dashboard:providers", args=[workspace_id])
    return f"{settings.PUBLIC_URL}{path}" if settings.PUBLIC_URL else path


def no_llm_notice(workspace_id: int) -> str:
    return (
        "No language model is connected to this workspace yet, so the agent can only repeat "
        "what it hears. Connect one (OpenAI, Ollama, vLLM, any OpenAI-compatible endpoint) "
        f"on the workspace's Providers page: {setup_url(workspace_id)}"
    )


def speech_options(kind: registry.Kind, name: str, providers: WorkspaceProviders) -> dict[str, Any]:
    """A speech provider's constructor options: the platform's settings, with the
    workspace's own key (and Orpheus URL) in place of the platform's where it set one."""
    s = settings
    defaults: dict[tuple[str, str], Callable[[], dict[str, Any]]] = {
        ("stt", "local"): lambda: {
            "end_silence_ms": s.LOCAL_STT_END_SILENCE_MS,
            "turn_model": s.LOCAL_STT_TURN_MODEL,
        },
        ("stt", "assemblyai"): lambda: {
            "api_key": s.ASSEMBLYAI_API_KEY or "",
            "base_url": s.ASSEMBLYAI_BASE_URL,
            "speech_model": s.ASSEMBLYAI_SPEECH_MODEL,
            "timeout_s": s.STT_TIMEOUT_S,
        },
        ("tts", "orpheus"): lambda: {
            "url": s.ORPHEUS_URL or "",
            "api_key": s.ORPHEUS_API_KEY or "",
            "timeout_s": s.TTS_TIMEOUT_S,
        },
        ("tts", "elevenlabs"): lambda: {
            "api_key": s.ELEVENLABS_API_KEY or "",
            "base_url": s.ELEVENLABS_BASE_URL,
            "model_id": s.ELEVENLABS_MODEL,
            "timeout_s": s.TTS_TIMEOUT_S,
        },
        ("tts", "openai"): lambda: {
            "api_key": s.OPENAI_API_KEY or "",
            "base_url": s.OPENAI_TTS_BASE_URL,
            "model": s.OPENAI_TTS_MODEL,
            "timeout_s": s.TTS_TIMEOUT_S,
        },
    }
    make = defaults.get((kind, name))
    options = make() if make is not None else {}
    account = providers.speech.get(name)
    if account is not None and (kind, name) in defaults:
        options["api_key"] = account.api_key or ""
        if name == "orpheus":
            options["url"] = account.url
    return options
