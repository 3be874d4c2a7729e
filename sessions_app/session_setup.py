"""Turn a connection's access and its `configure` message into a ready session plan.

Saved agent first, then the browser's inline fields on top, but only what the key allows:
inline config (instructions, greeting, voice, browser tools) and inline server-tool code
are two switches, both off for new publishable keys. A session token's variables are
fixed on top of everything. Runs in a thread (it reads the database); the orchestrator
itself never touches the ORM.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from django.conf import settings

from secrets_app.provider_credentials import WorkspaceProviders, provider_credentials_open
from sessions_app import protocol, workspace_providers
from sessions_app.access import CLOSE_INLINE_REFUSED, Access, agent_allowed
from sessions_app.models import Agent
from sessions_app.orchestrator import DEFAULT_EMPTY_REPLY, SessionConfig, ToolDefinition
from sessions_app.protocol import ErrorCode
from sessions_app.providers import registry
from sessions_app.providers.base import LLM, STT, TTS, ToolRunner
from sessions_app.providers.resilience import (
    ResilientLLM,
    ResilientSTT,
    ResilientTTS,
    RetryPolicy,
)
from sessions_app.services import handler_sha256
from tools_app.schema import SchemaError, to_json_schema

INLINE_FIELDS = {"instructions", "greeting", "voice", "tools", "vocabulary", "empty_reply"}
_SAVE_THE_AGENT = "save the agent in the dashboard and connect with agent=<slug>"


class ConfigureRefused(Exception):
    """``close_code`` None: the client may send a corrected configure."""

    def __init__(self, code: ErrorCode, message: str, close_code: int | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.close_code = ErrorCode(code), message, close_code


@dataclass
class SessionPlan:
    config: SessionConfig
    agent: Agent | None
    llm: LLM
    stt: STT | None
    tts: TTS | None
    tool_runner: ToolRunner
    # What rebuilds the providers when the session resumes in another process.
    stt_name: str | None = None
    tts_name: str | None = None
    llm_model: str | None = None
    llm_connection: str | None = None  # the workspace's LLM connection the agent names
    llm_fallbacks: list[dict[str, str]] = field(default_factory=list)
    tts_fallbacks: list[str] = field(default_factory=list)


def new_session_ids() -> tuple[str, str]:
    return secrets.token_hex(16), secrets.token_urlsafe(32)


def _tool(
    raw: dict[str, Any], path: str, *, pinned_hash: str | None, reads_secrets: bool = False
) -> ToolDefinition:
    try:
        parameters = to_json_schema(raw.get("parameters"))
    except SchemaError as exc:
        raise ConfigureRefused(ErrorCode.INVALID, f"{path}.{exc}") from None
    handler = raw.get("handler")
    timeout_ms = raw.get("timeoutMs")
    pinned = handler is not None and pinned_hash == handler_sha256(handler)
    return ToolDefinition(
        name=raw["name"],
        description=raw.get("description", ""),
        parameters=parameters,
        handler=handler,
        client=bool(raw.get("client")),
        timeout_s=timeout_ms / 1000 if timeout_ms else None,
        pinned=pinned,
        reads_secrets=pinned and reads_secrets,
    )


def _tools(
    agent: Agent | None, inline: list[protocol.ToolDeclaration] | None
) -> list[ToolDefinition]:
    tools: dict[str, ToolDefinition] = {}
    for index, saved in enumerate(agent.tools if agent else []):
        tools[saved["name"]] = _tool(
            saved,
            f"agent.tools[{index}]",
            pinned_hash=saved.get("handler_sha256"),
            reads_secrets=saved.get("reads_secrets") is True,
        )
    for index, declared in enumerate(inline or []):
        raw = declared.model_dump(by_alias=True, exclude_none=True)
        tools[declared.name] = _tool(raw, f"tools[{index}]", pinned_hash=None)
    return list(tools.values())


def _agent(access: Access, configure: protocol.ConfigureMessage) -> Agent | None:
    if configure.agent and (access.agent is None or configure.agent != access.agent.slug):
        return agent_allowed(access.key, configure.agent)
    return access.agent


def _check_inline(
    access: Access, configure: protocol.ConfigureMessage, agent: Agent | None
) -> None:
    key = access.key
    tools = configure.tools or []
    has_code = any(tool.handler is not None for tool in tools)
    inline = INLINE_FIELDS & configure.model_fields_set
    if all(tool.handler is not None for tool in tools):
        inline.discard("tools")  # server tools alone are the code switch's business
    if has_code and not (key.allow_inline_tool_code and not access.by_token):
        raise ConfigureRefused(
            ErrorCode.INLINE_CODE_REFUSED,
            "this key does not accept server-tool code from the page; " + _SAVE_THE_AGENT,
            CLOSE_INLINE_REFUSED,
        )
    if inline and not (key.allow_inline_config and not access.by_token):
        raise ConfigureRefused(
            ErrorCode.INLINE_CONFIG_REFUSED,
            f"this key does not accept inline config ({', '.join(sorted(inline))}); "
            + _SAVE_THE_AGENT,
            CLOSE_INLINE_REFUSED,
        )
    if agent is None and not key.allow_inline_config:
        raise ConfigureRefused(
            ErrorCode.INLINE_CONFIG_REFUSED,
            "this key only serves saved agents; name one with agent=<slug>",
            CLOSE_INLINE_REFUSED,
        )


def _llm(
    providers: WorkspaceProviders, connection: str | None, model: str | None
) -> tuple[LLM, str]:
    try:
        return workspace_providers.llm_for(providers, connection=connection, model=model)
    except workspace_providers.UnknownConnection:
        raise ConfigureRefused(
            ErrorCode.INVALID,
            f"this agent names LLM connection {connection!r}, which its workspace does not "
            "have; choose another in the agent's settings",
        ) from None


def _retry_policy() -> RetryPolicy:
    return RetryPolicy.from_ms(settings.PROVIDER_RETRY_DELAYS_MS)


def _llm_chain(
    providers: WorkspaceProviders,
    connection: str | None,
    model: str | None,
    fallbacks: list[dict[str, str]],
) -> tuple[ResilientLLM, str]:
    """The agent's LLM and then its fallbacks (``resilience``); the label for ``ready``.

    A fallback whose connection was deleted since the agent was saved, or that would be
    the offline stand-in, is left out: it could not answer in the primary's place."""
    llm, llm_name = _llm(providers, connection, model)
    chain = [(workspace_providers.llm_label(providers, connection=connection, model=model), llm)]
    for fallback in fallbacks:
        other_connection = fallback.get("connection") or None
        other_model = fallback.get("model") or None
        try:
            other, _name = workspace_providers.llm_for(
                providers, connection=other_connection, model=other_model
            )
        except workspace_providers.UnknownConnection:
            continue
        if not other.capabilities.offline:
            label = workspace_providers.llm_label(
                providers, connection=other_connection, model=other_model
            )
            chain.append((label, other))
    return ResilientLLM(chain, policy=_retry_policy()), llm_name


def _tts_chain(name: str, fallbacks: list[str], providers: WorkspaceProviders) -> ResilientTTS:
    chain = [(name, _speech("tts", name, providers))]
    for fallback in fallbacks:
        if fallback in registry.names("tts") and fallback != name:
            chain.append((fallback, _speech("tts", fallback, providers)))
    return ResilientTTS(chain, policy=_retry_policy())


def _stt(name: str, providers: WorkspaceProviders, vocabulary: list[str]) -> ResilientSTT:
    stt = _speech("stt", name, providers, vocabulary=vocabulary)
    return ResilientSTT(stt, policy=_retry_policy())


def _speech(kind: registry.Kind, name: str, providers: WorkspaceProviders, **hints: Any) -> Any:
    try:
        registry.choosable(kind, name)
        options = workspace_providers.speech_options(kind, name, providers)
    except registry.UnknownProvider:
        known = ", ".join(registry.names(kind, choosable=True))
        raise ConfigureRefused(
            ErrorCode.INVALID, f"this agent names {kind} provider {name!r}; known: {known}"
        ) from None
    return registry.create(kind, name, **options, **hints)


def _agent_or(agent: Agent | None, field: str, default: int) -> int:
    value = getattr(agent, field, None) if agent is not None else None
    return int(value) if value else default


def session_plan_build(
    *,
    access: Access,
    configure: protocol.ConfigureMessage,
    session_id: str,
    resume_token: str,
    reply_channel: str = "",
) -> SessionPlan:
    agent = _agent(access, configure)
    _check_inline(access, configure, agent)

    def pick(name: str, default: Any) -> Any:
        value = getattr(configure, name)
        return value if value is not None else default

    mode = pick("mode", agent.mode if agent else "voice")
    locked = dict(access.token_variables or {})
    llm_model = agent.llm_model if agent and agent.llm_model else None
    connection = agent.llm_provider if agent and agent.llm_provider else None
    llm_fallbacks = list(agent.llm_fallbacks) if agent else []
    tts_fallbacks = list(agent.tts_fallbacks) if agent else []
    providers = provider_credentials_open(workspace_id=access.workspace.pk)
    llm, llm_name = _llm_chain(providers, connection, llm_model, llm_fallbacks)
    speaks = mode == "voice"
    stt_name = (agent.stt_provider if agent else "") or settings.STT_PROVIDER
    tts_name = (agent.tts_provider if agent else "") or settings.TTS_PROVIDER
    config = SessionConfig(
        session_id=session_id,
        resume_token=resume_token,
        workspace_id=access.workspace.pk,
        llm_name=llm_name,
        instructions=pick("instructions", agent.instructions if agent else ""),
        greeting=pick("greeting", agent.greeting if agent else "") or None,
        voice=pick("voice", agent.voice if agent else "") or None,
        mode=mode,
        audio_ready=configure.audio_ready,
        barge_in_min_words=settings.BARGE_IN_MIN_WORDS,
        variables={**(configure.variables or {}), **locked},
        tools=_tools(agent, configure.tools),
        vocabulary=list(pick("vocabulary", agent.vocabulary if agent else [])),
        empty_reply=pick("empty_reply", agent.empty_reply if agent else "") or DEFAULT_EMPTY_REPLY,
        max_tool_steps=settings.MAX_TOOL_STEPS,
        client_tool_timeout=settings.CLIENT_TOOL_TIMEOUT_S,
        server_tool_timeout=settings.SANDBOX_WALL_TIME_S,
        max_tool_calls_per_step=settings.MAX_TOOL_CALLS_PER_STEP,
        locked_variables=locked,
        context_notes_max=settings.CONTEXT_NOTES_MAX,
        llm_request_max_bytes=settings.LLM_REQUEST_MAX_BYTES,
        idle_timeout_s=float(_agent_or(agent, "idle_timeout_s", settings.SESSION_IDLE_TIMEOUT_S)),
        max_duration_s=float(_agent_or(agent, "max_session_s", settings.SESSION_MAX_DURATION_S)),
        started_at=time.time(),
        notice=_llm_notice(llm_name, access.workspace.pk),
    )
    return SessionPlan(
        config=config,
        agent=agent,
        llm=llm,
        stt=_stt(stt_name, providers, config.vocabulary) if speaks else None,
        tts=_tts_chain(tts_name, tts_fallbacks, providers) if speaks else None,
        tool_runner=registry.create("tools", settings.TOOL_RUNNER, reply_channel=reply_channel),
        stt_name=stt_name if speaks else None,
        tts_name=tts_name if speaks else None,
        llm_model=llm_model,
        llm_connection=connection,
        llm_fallbacks=llm_fallbacks,
        tts_fallbacks=tts_fallbacks,
    )


def _llm_notice(llm_name: str, workspace_id: int) -> dict[str, str] | None:
    """What ``ready`` says when the workspace has no LLM: in words, and where to fix it."""
    if llm_name != workspace_providers.OFFLINE:
        return None
    return {
        "message": workspace_providers.no_llm_notice(workspace_id),
        "setupUrl": workspace_providers.setup_url(workspace_id),
    }


# ---------------------------------------------------------------- resumed sessions


def session_meta(
    plan: SessionPlan, *, access: Access, token_digest: str, lease_pools: tuple[str, ...]
) -> dict[str, Any]:
    """What another process needs to rebuild this session (JSON data, no resume token)."""
    config = {f.name: getattr(plan.config, f.name) for f in fields(SessionConfig)}
    config["tools"] = [asdict(tool) for tool in plan.config.tools]
    config["resume_token"] = ""
    return {
        "tokenDigest": token_digest,
        "workspaceId": access.workspace.pk,
        "keyId": access.key.pk,
        "leasePools": list(lease_pools),
        "config": config,
        "stt": plan.stt_name,
        "tts": plan.tts_name,
        "llmModel": plan.llm_model,
        "llmConnection": plan.llm_connection,
        "llmFallbacks": plan.llm_fallbacks,
        "ttsFallbacks": plan.tts_fallbacks,
    }


def session_config_restore(meta: dict[str, Any], *, resume_token: str) -> SessionConfig:
    data = dict(meta["config"])
    known = {f.name for f in fields(ToolDefinition)}
    data["tools"] = [
        ToolDefinition(**{k: v for k, v in tool.items() if k in known}) for tool in data["tools"]
    ]
    data["resume_token"] = resume_token
    return SessionConfig(**{f.name: data[f.name] for f in fields(SessionConfig) if f.name in data})


def session_plan_restore(
    *, meta: dict[str, Any], resume_token: str, reply_channel: str = ""
) -> SessionPlan:
    """The plan of a session resumed in this process: its config as it was accepted, fresh
    providers (settings as they are now), tool results on ``reply_channel``."""
    config = session_config_restore(meta, resume_token=resume_token)
    providers = provider_credentials_open(workspace_id=config.workspace_id)
    connection = meta.get("llmConnection")
    llm_fallbacks, tts_fallbacks = meta.get("llmFallbacks", []), meta.get("ttsFallbacks", [])
    llm, _llm_name = _llm_chain(providers, connection, meta.get("llmModel"), llm_fallbacks)
    stt, tts = meta.get("stt"), meta.get("tts")
    return SessionPlan(
        config=config,
        agent=None,
        llm=llm,
        stt=_stt(stt, providers, config.vocabulary) if stt else None,
        tts=_tts_chain(tts, tts_fallbacks, providers) if tts else None,
        tool_runner=registry.create("tools", settings.TOOL_RUNNER, reply_channel=reply_channel),
        stt_name=stt,
        tts_name=tts,
        llm_model=meta.get("llmModel"),
        llm_connection=connection,
        llm_fallbacks=llm_fallbacks,
        tts_fallbacks=tts_fallbacks,
    )


def speech_preload() -> None:
    """Start loading the models of the configured speech providers (at process start), so
    that the first session does not wait for them. A provider class may offer ``preload``."""
    configured: tuple[tuple[registry.Kind, str], ...] = (
        ("stt", settings.STT_PROVIDER),
        ("tts", settings.TTS_PROVIDER),
    )
    for kind, name in configured:
        preload = getattr(registry.provider_class(kind, name), "preload", None)
        if preload is not None:
            preload()
