"""Turn a connection's access and its `configure` message into a ready session plan.

Saved agent first, then the browser's inline fields on top, but only when the key
allows inline config. Runs in a thread (it reads the database); the orchestrator
itself never touches the ORM.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from django.conf import settings

from sessions_app import protocol
from sessions_app.access import CLOSE_INLINE_REFUSED, Access, agent_allowed
from sessions_app.models import Agent
from sessions_app.orchestrator import DEFAULT_EMPTY_REPLY, SessionConfig, ToolDefinition
from sessions_app.providers import registry
from sessions_app.providers.base import LLM, STT, TTS, ToolRunner
from sessions_app.services import handler_sha256
from tools_app.schema import SchemaError, to_json_schema

INLINE_FIELDS = {"instructions", "greeting", "voice", "tools", "vocabulary", "empty_reply"}


class ConfigureRefused(Exception):
    """``close_code`` None: the client may send a corrected configure."""

    def __init__(self, code: str, message: str, close_code: int | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.close_code = code, message, close_code


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


def new_session_ids() -> tuple[str, str]:
    return secrets.token_hex(16), secrets.token_urlsafe(32)


def _tool(
    raw: dict[str, Any], path: str, *, pinned_hash: str | None, reads_secrets: bool = False
) -> ToolDefinition:
    try:
        parameters = to_json_schema(raw.get("parameters"))
    except SchemaError as exc:
        raise ConfigureRefused("invalid", f"{path}.{exc}") from None
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
    inline = INLINE_FIELDS & configure.model_fields_set
    if access.key.allow_inline_config:
        return
    if inline:
        raise ConfigureRefused(
            "inline_config_refused",
            f"this key does not accept inline config ({', '.join(sorted(inline))}); "
            "save the agent in the dashboard and connect with agent=<slug>",
            CLOSE_INLINE_REFUSED,
        )
    if agent is None:
        raise ConfigureRefused(
            "inline_config_refused",
            "this key only serves saved agents; name one with agent=<slug>",
            CLOSE_INLINE_REFUSED,
        )


def _llm(model: str | None) -> tuple[LLM, str]:
    if not settings.LLM_BASE_URL:
        return registry.create("llm", "offline"), "offline"
    llm = registry.create(
        "llm",
        "openai",
        base_url=settings.LLM_BASE_URL,
        api_key=settings.LLM_API_KEY,
        model=model or settings.LLM_MODEL,
        timeout_s=settings.LLM_TIMEOUT_S,
    )
    return llm, "openai"


def _speech_options(kind: registry.Kind, name: str) -> dict[str, Any]:
    """A speech provider's settings, as its constructor takes them."""
    s = settings
    options: dict[tuple[str, str], Callable[[], dict[str, Any]]] = {
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
    make = options.get((kind, name))
    return make() if make is not None else {}


def _speech(kind: registry.Kind, name: str, **hints: Any) -> Any:
    try:
        return registry.create(kind, name, **_speech_options(kind, name), **hints)
    except registry.UnknownProvider:
        known = ", ".join(registry.names(kind))
        raise ConfigureRefused(
            "invalid", f"this agent names {kind} provider {name!r}; known: {known}"
        ) from None


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
    llm_model = agent.llm_model if agent and agent.llm_model else None
    llm, llm_name = _llm(llm_model)
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
        variables=dict(configure.variables or {}),
        tools=_tools(agent, configure.tools),
        vocabulary=list(pick("vocabulary", agent.vocabulary if agent else [])),
        empty_reply=pick("empty_reply", agent.empty_reply if agent else "") or DEFAULT_EMPTY_REPLY,
        max_tool_steps=settings.MAX_TOOL_STEPS,
        client_tool_timeout=settings.CLIENT_TOOL_TIMEOUT_S,
    )
    return SessionPlan(
        config=config,
        agent=agent,
        llm=llm,
        stt=_speech("stt", stt_name, vocabulary=config.vocabulary) if speaks else None,
        tts=_speech("tts", tts_name) if speaks else None,
        tool_runner=registry.create("tools", settings.TOOL_RUNNER, reply_channel=reply_channel),
        stt_name=stt_name if speaks else None,
        tts_name=tts_name if speaks else None,
        llm_model=llm_model,
    )


# ---------------------------------------------------------------- resumed sessions


def session_meta(plan: SessionPlan, *, access: Access, token_digest: str) -> dict[str, Any]:
    """What another process needs to rebuild this session (JSON data, no resume token)."""
    config = {f.name: getattr(plan.config, f.name) for f in fields(SessionConfig)}
    config["tools"] = [asdict(tool) for tool in plan.config.tools]
    config["resume_token"] = ""
    return {
        "tokenDigest": token_digest,
        "workspaceId": access.workspace.pk,
        "config": config,
        "stt": plan.stt_name,
        "tts": plan.tts_name,
        "llmModel": plan.llm_model,
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
    llm, _llm_name = _llm(meta.get("llmModel"))
    return SessionPlan(
        config=config,
        agent=None,
        llm=llm,
        stt=_speech("stt", meta["stt"], vocabulary=config.vocabulary) if meta.get("stt") else None,
        tts=_speech("tts", meta["tts"]) if meta.get("tts") else None,
        tool_runner=registry.create("tools", settings.TOOL_RUNNER, reply_channel=reply_channel),
        stt_name=meta.get("stt"),
        tts_name=meta.get("tts"),
        llm_model=meta.get("llmModel"),
    )


def speech_preload() -> None:
    """Start loading the models of the configured speech providers (at process start), so
    that the first session does not wait for them. A provider class may offer ``preload``."""
    for kind, name in (("stt", settings.STT_PROVIDER), ("tts", settings.TTS_PROVIDER)):
        preload = getattr(registry.provider_class(kind, name), "preload", None)
        if preload is not None:
            preload()
