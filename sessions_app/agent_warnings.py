"""What a saved agent needs that its workspace does not have yet: warnings, not refusals
(the secret or the key may well be added next), shown by the dashboard's agent form and
returned by the REST API as ``warnings`` ({field, message}).

- a server tool's handler reads a secret (``ctx.secrets.NAME``, found in its syntax tree,
  ``tools_app.handler_shape``) that the workspace does not have: at run time it would get
  ``undefined`` (the call's console says so too);
- its speech-to-text or text-to-speech provider needs a key that neither the workspace
  (Providers page) nor the platform's environment has;
- it would talk to no language model at all (the offline stand-in repeats what it hears).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from engine.providers import registry
from secrets_app.provider_credentials import WorkspaceProviders, provider_names
from secrets_app.selectors import secret_list
from sessions_app import workspace_providers
from sessions_app.models import Agent
from tools_app.handler_shape import secret_names


@dataclass(frozen=True)
class AgentWarning:
    field: str  # as the REST API names it: "tts_provider", "tools[0].handler"
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


def speech_usable(kind: registry.Kind, name: str, own_keys: frozenset[str]) -> bool:
    """A speech provider the workspace can use: its own key, the platform's, or none needed."""
    if name in own_keys:
        return True
    options = workspace_providers.speech_options(kind, name, WorkspaceProviders())
    needs = [options[k] for k in ("url", "api_key") if k in options]
    return not needs or any(needs)


def _missing_secrets(agent: Agent) -> list[AgentWarning]:
    have = set(secret_list(workspace=agent.workspace).values_list("name", flat=True))
    secrets_url = workspace_providers.dashboard_url("dashboard:secrets", agent.workspace_id)
    warnings = []
    for index, tool in enumerate(agent.tools):
        handler = tool.get("handler")
        for name in sorted(secret_names(handler) - have) if handler else []:
            warnings.append(AgentWarning(
                f"tools[{index}].handler",
                f"The tool {tool['name']} reads the secret {name}, which this workspace "
                f"does not have: ctx.secrets.{name} is undefined until you add it on the "
                f"Secrets page ({secrets_url}).",
            ))  # fmt: skip
    return warnings


_SPEECH: tuple[tuple[str, registry.Kind, str, str], ...] = (
    ("stt_provider", "stt", "speech-to-text", "STT_PROVIDER"),
    ("tts_provider", "tts", "text-to-speech", "TTS_PROVIDER"),
)


def _keyless_speech(agent: Agent, own_keys: frozenset[str]) -> list[AgentWarning]:
    providers_url = workspace_providers.dashboard_url("dashboard:providers", agent.workspace_id)
    warnings = []
    for field, kind, words, setting in _SPEECH:
        name = getattr(agent, field) or getattr(settings, setting)
        if speech_usable(kind, name, own_keys):
            continue
        spec = registry.provider(kind, name)
        variables = " and ".join(s.name for s in spec.settings if s.default is None)
        warnings.append(AgentWarning(
            field,
            f"The {words} provider {spec.label} has no key, neither this workspace's "
            f"(Providers page: {providers_url}) nor the platform's ({variables}): its "
            f"sessions will fail with {kind}_failed until one is added.",
        ))  # fmt: skip
    return warnings


def _no_llm(agent: Agent, connections: list[str]) -> list[AgentWarning]:
    if agent.llm_provider or connections or workspace_providers.platform_llm():
        return []  # (an agent's own connection is checked when it is saved)
    providers_url = workspace_providers.dashboard_url("dashboard:providers", agent.workspace_id)
    return [AgentWarning(
        "llm_provider",
        "No language model is connected to this workspace or the platform, so the agent "
        f"can only repeat what it hears: connect one on the Providers page ({providers_url}).",
    )]  # fmt: skip


def agent_warnings(*, agent: Agent) -> list[AgentWarning]:
    names = provider_names(workspace=agent.workspace)
    return [
        *_missing_secrets(agent),
        *_keyless_speech(agent, names.speech),
        *_no_llm(agent, names.llms),
    ]
