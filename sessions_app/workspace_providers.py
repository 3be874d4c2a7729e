"""Which provider a session talks to, on whose account.

A workspace's own connections win (``secrets_app.provider_credentials``): the LLM an
agent names, else the workspace's default LLM connection, and a speech provider's key
when the workspace set one. The platform's environment (``LLM_BASE_URL``,
``ASSEMBLYAI_API_KEY``…, which each provider's spec reads) is the fallback for whatever
the workspace did not set. With neither, the LLM is the offline stand-in, and the session
says how to connect one.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import reverse

from core import outbound
from engine.providers import registry
from engine.providers.base import LLM
from secrets_app.provider_credentials import LLMConnection, WorkspaceProviders
from sessions_app.scrubbing import Credential, Scrubber

OFFLINE = "offline"
OPENAI = "openai"


class UnknownConnection(LookupError):
    """An agent names an LLM connection its workspace does not have (any more)."""


def openai_llm(connection: LLMConnection, *, model: str | None = None) -> LLM:
    """The adapter for a workspace's connection: its address is the customer's, so it is
    dialled under the egress guard's policy, as tool fetches and webhooks are."""
    spec = registry.provider("llm", OPENAI)
    options = spec.own_account(connection) if spec.own_account else {}
    options["egress_policy"] = outbound.policy()
    if model:
        options["model"] = model
    return registry.create("llm", OPENAI, **options)


def platform_llm() -> dict[str, Any]:
    """The platform's own LLM endpoint (``LLM_BASE_URL``, ``LLM_MODEL``…, read by the
    provider's spec); empty: the platform has none."""
    return registry.provider("llm", OPENAI).options()


def llm_for(
    providers: WorkspaceProviders, *, connection: str | None, model: str | None
) -> tuple[LLM, str]:
    """(the LLM, its label for ``ready.llm``: ``openai`` or ``offline``)."""
    chosen = providers.llm(connection)
    if connection and chosen is None:
        raise UnknownConnection(connection)
    if chosen is not None:
        return openai_llm(chosen, model=model), OPENAI
    platform = platform_llm()
    if platform:
        return registry.create(
            "llm", OPENAI, **{**platform, "model": model or platform["model"]}
        ), OPENAI
    return registry.create("llm", OFFLINE), OFFLINE


def llm_label(providers: WorkspaceProviders, *, connection: str | None, model: str | None) -> str:
    """How metrics and records name the LLM ``llm_for`` gives: ``connection:model``, the
    platform's as ``platform:model``, or ``offline``."""
    chosen = providers.llm(connection)
    if chosen is not None:
        return f"{chosen.name}:{model or chosen.model}"
    platform = platform_llm()
    if platform:
        return f"platform:{model or platform['model']}"
    return OFFLINE


def has_llm(providers: WorkspaceProviders) -> bool:
    return bool(providers.llms or platform_llm())


def dashboard_url(view: str, workspace_id: int, *args: Any) -> str:
    """A workspace's dashboard page, absolute when ``PUBLIC_URL`` is set (a page on another
    site shows it to its developer), else a path."""
    path = reverse(view, args=[workspace_id, *args])
    return f"{settings.PUBLIC_URL}{path}" if settings.PUBLIC_URL else path


def setup_url(workspace_id: int) -> str:
    """The dashboard page where a workspace connects its providers."""
    return dashboard_url("dashboard:providers", workspace_id)


def no_llm_notice(workspace_id: int) -> str:
    return (
        "No language model is connected to this workspace yet, so the agent can only repeat "
        "what it hears. Connect one (OpenAI, Ollama, vLLM, any OpenAI-compatible endpoint) "
        f"on the workspace's Providers page: {setup_url(workspace_id)}"
    )


def speech_options(kind: registry.Kind, name: str, providers: WorkspaceProviders) -> dict[str, Any]:
    """A speech provider's constructor options: the platform's settings (its module says
    which), with the workspace's own key (and Orpheus URL) in place of the platform's. A
    URL the workspace gave is dialled under the egress guard's policy."""
    spec = registry.provider(kind, name)
    options = spec.options()
    account = providers.speech.get(name)
    if account is not None and spec.own_account is not None:
        own = spec.own_account(account)
        if "url" in own:
            own["egress_policy"] = outbound.policy()
        options.update(own)
    return options


def platform_scrubber() -> Scrubber:
    """A scrubber that knows the platform's provider keys (each provider's key settings:
    ``LLM_API_KEY``, ``ASSEMBLYAI_API_KEY``…)."""
    keys: list[str] = []
    for kind in ("llm", "stt", "tts"):
        for name in registry.platform_names(kind):
            keys += registry.provider(kind, name).platform_keys()
    return Scrubber(Credential(key) for key in keys)


def session_scrubber(providers: WorkspaceProviders) -> Scrubber:
    """The scrubber a session holds: every provider key it may use, the workspace's own and
    the platform's. The workspace's secrets are masked where an error is recorded
    (``records``), off the event loop, and decrypted only if an error is."""
    return platform_scrubber().with_credentials(Credential(key) for key in providers.keys())
