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

from engine import protocol
from engine.protocol import CloseCode, ErrorCode
from engine.providers import languages, registry
from engine.providers.base import LLM, STT, TTS
from engine.providers.breaker import BreakerPolicy
from engine.providers.resilience import Chain, RetryPolicy
from engine.session import DEFAULT_EMPTY_REPLY, SessionConfig, ToolDefinition
from engine.session.config import DEFAULT_TOOL_FILLER, DEFAULT_TOOL_FILLER_AFTER_S
from engine.tools.runner import ToolRunner
from engine.tools.schema import SchemaError, to_json_schema
from knowledge_app import session_tool as knowledge_tool
from mcp_app import session_tool as mcp_tool
from realtime.access import Access
from secrets_app.models import ApiKey
from secrets_app.provider_credentials import WorkspaceProviders, provider_credentials_open
from sessions_app import versions, workspace_providers
from sessions_app.models import Agent, AgentVersion
from sessions_app.scrubbing import Scrubber
from sessions_app.services import handler_sha256
from sessions_app.versions import ServedAgent

INLINE_FIELDS = {"instructions", "greeting", "voice", "tools", "vocabulary", "empty_reply"}


class ConfigureRefused(Exception):
    """``close_code`` None: the client may send a corrected configure."""

    def __init__(self, code: ErrorCode, message: str, close_code: int | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.close_code = ErrorCode(code), message, close_code


@dataclass
class SessionPlan:
    config: SessionConfig
    agent: Agent | None
    agent_version: AgentVersion | None  # the version that serves the session
    # Each with its fallbacks and retries; the session wraps them (``resilience``).
    llm: Chain[LLM]
    stt: Chain[STT] | None
    tts: Chain[TTS] | None
    tool_runner: ToolRunner
    # What rebuilds the providers when the session resumes in another process.
    stt_name: str | None = None
    tts_name: str | None = None
    llm_model: str | None = None
    llm_connection: str | None = None  # the workspace's LLM connection the agent names
    llm_fallbacks: list[dict[str, str]] = field(default_factory=list)
    tts_fallbacks: list[str] = field(default_factory=list)
    # Every credential the session uses, to mask in the texts it shows.
    scrubber: Scrubber = field(default_factory=Scrubber)
    record_audio: bool = False  # the served agent records (the record's privacy decides)


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
    agent: ServedAgent | None, inline: list[protocol.ToolDeclaration] | None
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


class InlineRefused(ConfigureRefused):
    """The key (or token) refused what the page sent of its own, all of it at once; the
    connection says it in words, naming the switches that would allow it
    (``connection.refusals``)."""

    def __init__(
        self,
        *,
        key: ApiKey,
        by_token: bool,
        code_tools: tuple[str, ...],
        config_fields: tuple[str, ...],
        no_agent: bool,
        variables: tuple[str, ...] = (),
    ) -> None:
        config = bool(config_fields or no_agent or variables)
        code = ErrorCode.INLINE_CONFIG_REFUSED if config else ErrorCode.INLINE_CODE_REFUSED
        super().__init__(code, "the page's own settings were refused", CloseCode.INLINE_REFUSED)
        self.key, self.by_token = key, by_token
        self.code_tools = code_tools  # server tools whose code the page sent
        self.config_fields = config_fields  # its own settings, in wire names
        self.no_agent = no_agent  # it named no saved agent, and the key serves those only
        self.variables = variables  # a token session: variables its page_variables lack

    @property
    def refused(self) -> bool:
        return bool(self.code_tools or self.config_fields or self.no_agent or self.variables)


_WIRE_NAMES = {"empty_reply": "emptyReply", "tools": "browser tools"}


def _check_inline(
    access: Access, configure: protocol.ConfigureMessage, agent: Agent | None
) -> None:
    tools = configure.tools or []
    code_tools = tuple(tool.name for tool in tools if tool.handler is not None)
    inline = INLINE_FIELDS & configure.model_fields_set
    if all(tool.handler is not None for tool in tools):
        inline.discard("tools")  # server tools alone are the code switch's business
    error = InlineRefused(
        key=access.key,
        by_token=access.by_token,
        code_tools=() if access.inline_tool_code_allowed else code_tools,
        config_fields=()
        if access.inline_config_allowed
        else tuple(sorted(_WIRE_NAMES.get(f, f) for f in inline)),
        no_agent=agent is None and not access.inline_config_allowed,
        variables=_variables_refused(access, configure.variables or {}),
    )
    if error.refused:
        raise error


def _variables_refused(access: Access, sent: dict[str, str]) -> tuple[str, ...]:
    """A token session's variables are the token's: the page sets only those its
    ``page_variables`` name (sending a fixed one's own value changes nothing)."""
    allowed, fixed = access.page_variables, access.locked_variables
    if allowed is None:
        return ()
    return tuple(
        sorted(
            name for name, value in sent.items() if name not in allowed and fixed.get(name) != value
        )
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


def _breakers() -> BreakerPolicy | None:
    failures = settings.PROVIDER_BREAKER_FAILURES
    return BreakerPolicy(failures, settings.PROVIDER_BREAKER_COOLDOWN_S) if failures else None


def _chain(providers: list[tuple[str, Any]], workspace_id: int) -> Chain[Any]:
    """Retries and breakers as configured; the breakers are per provider and workspace, so
    one workspace's failing credential is skipped for it alone."""
    return Chain(providers, _retry_policy(), _breakers(), f"workspace:{workspace_id}")


def _llm_chain(
    providers: WorkspaceProviders,
    connection: str | None,
    model: str | None,
    fallbacks: list[dict[str, str]],
    workspace_id: int,
) -> tuple[Chain[LLM], str]:
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
    return _chain(chain, workspace_id), llm_name


def _tts_chain(
    name: str, fallbacks: list[str], providers: WorkspaceProviders, config: SessionConfig
) -> Chain[TTS]:
    """The agent's TTS, then its fallbacks that speak the agent's language."""
    chain = [(name, _tts(name, providers, config.language))]
    for fallback in fallbacks:
        if fallback in registry.names("tts") and fallback != name:
            adapter = registry.provider_class("tts", fallback)
            if _speaks(adapter, config.language):
                chain.append((fallback, _tts(fallback, providers, config.language)))
    return _chain(chain, config.workspace_id)


def _tts(name: str, providers: WorkspaceProviders, language: str) -> TTS:
    options = _speech_options("tts", name, providers, language)
    _refuse_unavailable(registry.provider_class("tts", name), _UNAVAILABLE["tts"])
    return registry.create("tts", name, **options)


def _stt(name: str, providers: WorkspaceProviders, config: SessionConfig) -> Chain[STT]:
    options = _speech_options("stt", name, providers, config.language)
    _refuse_unavailable(registry.provider_class("stt", name), _UNAVAILABLE["stt"])
    stt = registry.create("stt", name, **options, vocabulary=config.vocabulary)
    return Chain([(name, stt)], policy=_retry_policy())


def _speaks(adapter: type[STT] | type[TTS], language: str) -> bool:
    capabilities = adapter.capabilities
    return languages.supports(capabilities.languages, capabilities.detects_language, language)


def _language_options(kind: registry.Kind, name: str, language: str) -> dict[str, Any]:
    """``language`` for a provider that hears or speaks it (English: nothing to say);
    refused in words for one that does not, rather than a session that mishears."""
    adapter: type[STT] | type[TTS] = (
        registry.provider_class("stt", name)
        if kind == "stt"
        else registry.provider_class("tts", name)
    )
    if not _speaks(adapter, language):
        spec = registry.provider(kind, name)
        what = "understand" if kind == "stt" else "speak"
        wanted = (
            "the caller's language" if language == languages.DETECT else (languages.NAMES[language])
        )
        raise ConfigureRefused(
            ErrorCode.INVALID,
            f"this agent speaks {wanted}, which {spec.label} cannot {what}; choose another "
            f"{kind} provider in the agent's settings (see the Languages page of the docs)",
        )
    return {} if language == languages.ENGLISH else {"language": language}


_UNAVAILABLE = {
    "stt": "this server cannot recognise speech right now (its offline speech model failed "
    "to load); try again in a moment",
    "tts": "this server cannot speak right now (its offline voice failed to load); "
    "try again in a moment",
}


def _refuse_unavailable(adapter: type[STT] | type[TTS], message: str) -> None:
    """A voice session whose offline model failed to load is refused, never run deaf or
    mute; the cause (what to install) is in the log and in ``/healthz``."""
    if adapter.unavailable() is not None:
        raise ConfigureRefused(ErrorCode.SERVICE_UNAVAILABLE, message, CloseCode.TRY_AGAIN)


def _speech_options(
    kind: registry.Kind, name: str, providers: WorkspaceProviders, language: str
) -> dict[str, Any]:
    try:
        registry.choosable(kind, name)
        options = workspace_providers.speech_options(kind, name, providers)
    except registry.UnknownProvider:
        known = ", ".join(registry.names(kind, choosable=True))
        raise ConfigureRefused(
            ErrorCode.INVALID, f"this agent names {kind} provider {name!r}; known: {known}"
        ) from None
    return options | _language_options(kind, name, language)


def _agent_or(agent: ServedAgent | None, field: str, default: int) -> int:
    value = getattr(agent, field, None) if agent is not None else None
    return int(value) if value else default


def _filler_after_s(agent: ServedAgent | None) -> float:
    after_ms = agent.tool_filler_after_ms if agent is not None else None
    return DEFAULT_TOOL_FILLER_AFTER_S if after_ms is None else after_ms / 1000


def session_plan_build(
    *,
    access: Access,
    configure: protocol.ConfigureMessage,
    session_id: str,
    resume_token: str,
    reply_channel: str = "",
    served: ServedAgent | None = None,
) -> SessionPlan:
    """``served``: this version (or draft) of the agent rather than the one a session of
    this access would get (tests and simulations)."""
    saved = access.agent_for(configure.agent)
    _check_inline(access, configure, saved)
    agent = served or _served(access, saved, session_id)

    def pick(name: str, default: Any) -> Any:
        value = getattr(configure, name)
        return value if value is not None else default

    mode = pick("mode", agent.mode if agent else "voice")
    locked = access.locked_variables
    llm_model = agent.llm_model if agent and agent.llm_model else None
    connection = agent.llm_provider if agent and agent.llm_provider else None
    llm_fallbacks = list(agent.llm_fallbacks) if agent else []
    tts_fallbacks = list(agent.tts_fallbacks) if agent else []
    providers = provider_credentials_open(workspace_id=access.workspace.pk)
    llm, llm_name = _llm_chain(providers, connection, llm_model, llm_fallbacks, access.workspace.pk)
    speaks = mode == "voice"
    stt_name = (agent.stt_provider if agent else "") or settings.STT_PROVIDER
    tts_name = (agent.tts_provider if agent else "") or settings.TTS_PROVIDER
    language = languages.normalised(agent.language if agent else "")
    config = SessionConfig(
        session_id=session_id,
        resume_token=resume_token,
        workspace_id=access.workspace.pk,
        llm_name=llm_name,
        instructions=languages.with_instruction(
            pick("instructions", agent.instructions if agent else ""), language
        ),
        greeting=pick("greeting", agent.greeting if agent else "") or None,
        voice=pick("voice", agent.voice if agent else "") or None,
        mode=mode,
        audio_ready=configure.audio_ready,
        barge_in_min_words=settings.BARGE_IN_MIN_WORDS,
        preemptive_generation=agent.preemptive_generation if agent is not None else True,
        variables={**(configure.variables or {}), **locked},
        tools=_tools(agent, configure.tools),
        vocabulary=list(pick("vocabulary", agent.vocabulary if agent else [])),
        language=language,
        empty_reply=pick("empty_reply", agent.empty_reply if agent else "") or DEFAULT_EMPTY_REPLY,
        max_tool_steps=settings.MAX_TOOL_STEPS,
        client_tool_timeout=settings.CLIENT_TOOL_TIMEOUT_S,
        server_tool_timeout=settings.SANDBOX_WALL_TIME_S,
        max_tool_calls_per_step=settings.MAX_TOOL_CALLS_PER_STEP,
        tool_filler=(agent.tool_filler if agent else "") or DEFAULT_TOOL_FILLER,
        tool_filler_after_s=_filler_after_s(agent),
        locked_variables=locked,
        page_variables=access.page_variables,
        context_notes_max=settings.CONTEXT_NOTES_MAX,
        llm_request_max_bytes=settings.LLM_REQUEST_MAX_BYTES,
        idle_timeout_s=float(_agent_or(agent, "idle_timeout_s", settings.SESSION_IDLE_TIMEOUT_S)),
        max_duration_s=float(_agent_or(agent, "max_session_s", settings.SESSION_MAX_DURATION_S)),
        started_at=time.time(),
        notice=_llm_notice(llm_name, access.workspace.pk),
    )
    if agent is not None:
        knowledge_tool.configure(
            config,
            knowledge_base_ids=agent.knowledge_base_ids,
            mode=agent.knowledge_mode,
            timeout_ms=agent.knowledge_timeout_ms,
        )
    if saved is not None:
        # MCP allowlists are the agent's as they are now, for every version (docs/versions.md).
        mcp_tool.configure(config, agent=saved)
    return SessionPlan(
        config=config,
        agent=saved,
        agent_version=agent.version if agent is not None else None,
        llm=llm,
        stt=_stt(stt_name, providers, config) if speaks else None,
        tts=_tts_chain(tts_name, tts_fallbacks, providers, config) if speaks else None,
        tool_runner=registry.create("tools", settings.TOOL_RUNNER, reply_channel=reply_channel),
        stt_name=stt_name if speaks else None,
        tts_name=tts_name if speaks else None,
        llm_model=llm_model,
        llm_connection=connection,
        llm_fallbacks=llm_fallbacks,
        tts_fallbacks=tts_fallbacks,
        scrubber=workspace_providers.session_scrubber(providers),
        record_audio=bool(agent.record_audio) if agent is not None else False,
    )


def _served(access: Access, agent: Agent | None, session_id: str) -> ServedAgent | None:
    """The version of ``agent`` this session gets: the token's pin, the key's, the split's
    share, else the published one."""
    if agent is None:
        return None
    try:
        return versions.served_agent(
            agent=agent,
            session_id=session_id,
            key=None if access.by_token else access.key,
            pinned=access.pinned_version,
        )
    except versions.NoPublishedVersion as refused:
        raise ConfigureRefused(ErrorCode.INVALID, str(refused)) from None


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
        "keyId": access.key.pk,  # a resume must come through this key (resuming.py)
        "origin": access.origin,  # ...from this page origin
        "agentId": plan.agent.pk if plan.agent is not None else None,
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
    llm, _llm_name = _llm_chain(
        providers, connection, meta.get("llmModel"), llm_fallbacks, config.workspace_id
    )
    stt, tts = meta.get("stt"), meta.get("tts")
    return SessionPlan(
        config=config,
        agent=None,
        agent_version=None,
        llm=llm,
        stt=_stt(stt, providers, config) if stt else None,
        tts=_tts_chain(tts, tts_fallbacks, providers, config) if tts else None,
        tool_runner=registry.create("tools", settings.TOOL_RUNNER, reply_channel=reply_channel),
        stt_name=stt,
        tts_name=tts,
        llm_model=meta.get("llmModel"),
        llm_connection=connection,
        llm_fallbacks=llm_fallbacks,
        tts_fallbacks=tts_fallbacks,
        scrubber=workspace_providers.session_scrubber(providers),
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
