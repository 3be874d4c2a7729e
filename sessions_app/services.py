"""Writes for agents and session records."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, ProtectedError, RestrictedError
from django.utils import timezone
from pydantic import ValidationError as PydanticError

from core.storable import storable, strings_mapped
from egress.secret_refs import SecretBinding
from engine import protocol
from engine.providers import registry
from engine.providers.base import TTS
from secrets_app import crypto
from secrets_app.audit import SYSTEM, Actor, audit_record
from secrets_app.models import ApiKey, Workspace
from secrets_app.provider_credentials import (
    MODEL_MAX,
    llm_connection_names,
    provider_names,
)
from secrets_app.validators import clean_origins
from sessions_app import privacy, versions, workspace_providers
from sessions_app.agent_tools import agent_tools_check
from sessions_app.agent_warnings import speech_usable
from sessions_app.analysis_settings import analysis_settings_clean
from sessions_app.models import (
    Agent,
    AgentVersion,
    Session,
    SessionError,
    SessionToken,
    ToolCallRecord,
    TranscriptEntry,
    TurnRecord,
)
from sessions_app.scrubbing import Credential, Scrubber
from tools_app.services import scrub, secret_bindings

TOOL_TEXT_MAX_BYTES = 4096  # per stored argument/result/error text
_TRUNCATED = " … [truncated]"

AGENT_FIELDS = (
    "name", "slug", "instructions", "greeting", "voice", "mode",
    "llm_model", "llm_provider", "stt_provider", "tts_provider", "vocabulary", "empty_reply",
    "language",
    "idle_timeout_s", "max_session_s", "llm_fallbacks", "tts_fallbacks", "zero_retention",
    "analysis", "tool_filler", "tool_filler_after_ms", "knowledge_timeout_ms", "record_audio",
    "preemptive_generation",
)  # fmt: skip
# How saves reach sessions (docs/versions.md), settable beside the fields above.
VERSIONING_FIELDS = ("drafts", "require_tests")
FALLBACKS_MAX = 3  # per kind: each one is a further wait before the user hears anything


def handler_sha256(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def agent_tools_clean(
    tools: list[Any],
    *,
    reads_secrets: bool = False,
    saved: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Tools as stored: validated, with the hash that pins each saved handler.

    ``reads_secrets``: the one saving may read secret values (an owner or admin, a
    secret API key). A handler this save writes or changes is theirs: pinned with that
    right. A handler it leaves as it was in ``saved`` keeps the right it had, so saving an
    agent never hands secret values to code somebody else wrote.
    """
    kept = {
        t["handler_sha256"]: t.get("reads_secrets") is True
        for t in saved or []
        if t.get("handler_sha256")
    }
    pinned = []
    for declared in agent_tools_check(tools):
        tool = declared.model_dump(by_alias=True, exclude_none=True)
        if declared.handler is not None:
            digest = handler_sha256(declared.handler)
            tool["handler_sha256"] = digest
            tool["reads_secrets"] = kept.get(digest, reads_secrets)
        pinned.append(tool)
    return pinned


def agent_vocabulary_clean(vocabulary: Any) -> list[str]:
    """The recognition hints as stored: the same rules as a browser's configure."""
    try:
        message = protocol.ConfigureMessage.model_validate(
            {"type": "configure", "vocabulary": vocabulary}, by_alias=True, by_name=False
        )
    except PydanticError as exc:
        raise ValidationError({"vocabulary": [protocol.describe_errors(exc)]}) from None
    return [term.strip() for term in message.vocabulary or []]


def _check_speech_providers(agent: Agent) -> None:
    """Providers by name: one this platform has, never a scripted fake outside the tests."""
    speech: tuple[tuple[str, registry.Kind], ...] = (
        ("stt_provider", "stt"),
        ("tts_provider", "tts"),
    )
    for field, kind in speech:
        name = getattr(agent, field)
        if not name:
            continue
        try:
            registry.choosable(kind, name)
        except registry.UnknownProvider:
            known = ", ".join(registry.names(kind, choosable=True))
            raise ValidationError(
                {field: [f"no {kind} provider named {name[:40]!r}; choose one of {known}"]}
            ) from None


def _check_voice(agent: Agent) -> None:
    """A voice the agent's TTS does not have is refused now, not found out in a session."""
    voice = agent.voice.strip()
    provider = agent.tts_provider or settings.TTS_PROVIDER
    voices = registry.provider_class("tts", provider).capabilities.voices
    if voice and voices is not None and voice.lower() not in voices:
        raise ValidationError(
            {"voice": [f"text-to-speech {provider!r} has no voice {voice[:40]!r}; "
                       f"its voices: {', '.join(voices)}"]}
        )  # fmt: skip


def _check_llm_provider(agent: Agent) -> None:
    """An agent names one of its workspace's LLM connections, or none (the default)."""
    names = llm_connection_names(workspace=agent.workspace)
    if agent.llm_provider and agent.llm_provider not in names:
        known = ", ".join(names) or "none yet (add one under Providers)"
        raise ValidationError(
            {"llm_provider": [f"this workspace has no LLM connection named "
                              f"{agent.llm_provider[:64]!r}; its connections: {known}"]}
        )  # fmt: skip


def _fallback_list(value: Any, field: str) -> list[Any]:
    if not isinstance(value, list) or len(value) > FALLBACKS_MAX:
        raise ValidationError({field: [f"a list of at most {FALLBACKS_MAX} fallbacks"]})
    return value


def _llm_fallback(value: Any, index: int, names: list[str]) -> dict[str, str]:
    def refuse(message: str) -> ValidationError:
        return ValidationError({"llm_fallbacks": [f"llm_fallbacks[{index}]: {message}"]})

    if not isinstance(value, dict) or set(value) - {"connection", "model"}:
        raise refuse('an object {"connection": name, "model": name}')
    connection, model = value.get("connection") or "", value.get("model") or ""
    if not isinstance(connection, str) or not isinstance(model, str):
        raise refuse("connection and model are names (text)")
    connection, model = connection.strip(), model.strip()
    if connection and connection not in names:
        known = ", ".join(names) or "none yet (add one under Providers)"
        raise refuse(f"no LLM connection named {connection[:64]!r}; its connections: {known}")
    if not connection and not names and not workspace_providers.platform_llm():
        raise refuse("this workspace has no LLM connection to fall back to")
    if len(model) > MODEL_MAX or "\x00" in model:
        raise refuse(f"a model name has at most {MODEL_MAX} characters")
    return {"connection": connection, "model": model}


def _check_llm_fallbacks(agent: Agent) -> None:
    """Each fallback an LLM the workspace may use, none repeating the primary or another."""
    names = llm_connection_names(workspace=agent.workspace)
    values = _fallback_list(agent.llm_fallbacks, "llm_fallbacks")
    cleaned = [_llm_fallback(value, index, names) for index, value in enumerate(values)]
    seen = {(agent.llm_provider, agent.llm_model)}
    for index, fallback in enumerate(cleaned):
        key = (fallback["connection"], fallback["model"])
        if key in seen:
            raise ValidationError({"llm_fallbacks": [
                f"llm_fallbacks[{index}]: the same LLM as the agent's or an earlier fallback"
            ]})  # fmt: skip
        seen.add(key)
    agent.llm_fallbacks = cleaned


def _tts_sample_rate(name: str) -> int | None:
    tts: type[TTS] = registry.provider_class("tts", name)
    return tts.capabilities.sample_rate


def _check_tts_fallbacks(agent: Agent) -> None:
    """Known providers (never the test fakes) that speak at the primary's sample rate (the
    browser was told that rate) and that the workspace has a key for."""
    primary = agent.tts_provider or settings.TTS_PROVIDER
    rate = _tts_sample_rate(primary)
    own_keys = provider_names(workspace=agent.workspace).speech
    values = _fallback_list(agent.tts_fallbacks, "tts_fallbacks")
    seen = {primary}
    for index, name in enumerate(values):
        problem = None
        if not isinstance(name, str) or name not in registry.platform_names("tts"):
            known = ", ".join(registry.platform_names("tts"))
            problem = f"not a text-to-speech provider; known: {known}"
        elif name in seen:
            problem = "the same provider as the agent's or an earlier fallback"
        elif _tts_sample_rate(name) != rate:
            problem = f"speaks at another sample rate than {primary!r}"
        elif not speech_usable("tts", name, own_keys):
            problem = "has no key, neither this workspace's (Providers) nor the platform's"
        if problem is not None:
            raise ValidationError({"tts_fallbacks": [f"tts_fallbacks[{index}]: {problem}"]})
        seen.add(name)


def _save(agent: Agent) -> Agent:
    agent.drafts = agent.drafts or agent.require_tests  # tests gate Publish, not every save
    agent.vocabulary = agent_vocabulary_clean(agent.vocabulary)
    agent.analysis = analysis_settings_clean(agent.analysis)
    _check_speech_providers(agent)
    _check_voice(agent)
    _check_llm_provider(agent)
    _check_llm_fallbacks(agent)
    _check_tts_fallbacks(agent)
    try:
        with transaction.atomic(), versions.published_by_caller():
            agent.save()
    except IntegrityError:
        raise ValidationError(
            {"slug": [f"an agent with slug {agent.slug!r} already exists"]}
        ) from None
    return agent


def _handler_hashes(tools: list[dict[str, Any]]) -> dict[str, str]:
    return {t["name"]: t["handler_sha256"] for t in tools if t.get("handler_sha256")}


def _audit_agent(agent: Agent, actor: Actor, action: str, before: dict[str, str]) -> None:
    """The agent's change, and each server-tool handler that was added, changed or removed
    (by SHA-256: the audit log never holds handler source)."""
    audit_record(workspace=agent.workspace, actor=actor, action=action, target=agent.slug)
    after = _handler_hashes(agent.tools)
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            audit_record(
                workspace=agent.workspace, actor=actor, action="agent.handler_changed",
                target=f"{agent.slug}/{name}",
                details={"from_sha256": before.get(name), "to_sha256": after.get(name)},
            )  # fmt: skip


def agent_create(
    *,
    workspace: Workspace,
    tools: list[dict[str, Any]] | None = None,
    reads_secrets: bool = False,
    actor: Actor = SYSTEM,
    **fields: Any,
) -> Agent:
    unknown = set(fields) - set(AGENT_FIELDS) - set(VERSIONING_FIELDS)
    if unknown:
        raise TypeError(f"unknown agent fields: {sorted(unknown)}")
    cleaned = agent_tools_clean(tools or [], reads_secrets=reads_secrets)
    agent = _save(Agent(workspace=workspace, tools=cleaned, **fields))
    _audit_agent(agent, actor, "agent.created", {})
    versions.agent_changed(agent=agent, actor=actor)
    return agent


def agent_update(
    *,
    agent: Agent,
    tools: list[dict[str, Any]] | None = None,
    reads_secrets: bool = False,
    actor: Actor = SYSTEM,
    **fields: Any,
) -> Agent:
    before = _handler_hashes(agent.tools)
    gated = Agent.objects.filter(pk=agent.pk, require_tests=True).exists()
    for name, value in fields.items():
        if name not in AGENT_FIELDS and name not in VERSIONING_FIELDS:
            raise TypeError(f"unknown agent field {name!r}")
        setattr(agent, name, value)
    if tools is not None:
        agent.tools = agent_tools_clean(tools, reads_secrets=reads_secrets, saved=agent.tools)
    agent.updated_at = timezone.now()
    agent = _save(agent)
    _audit_agent(agent, actor, "agent.updated", before)
    if not gated:  # an agent that required tests is published only by Publish
        versions.agent_changed(agent=agent, actor=actor)
    return agent


class AgentInUse(Exception):
    """The agent still answers something (a phone number) that must be moved first."""


def agent_delete(*, agent: Agent, actor: Actor = SYSTEM) -> None:
    """AgentInUse: something still points at the agent (a phone number answered by it):
    deleting the agent must not delete what its deleter may not manage."""
    before = _handler_hashes(agent.tools)
    with transaction.atomic():
        try:
            Agent.objects.filter(pk=agent.pk).delete()
        except (ProtectedError, RestrictedError) as refused:
            raise AgentInUse(_in_use(refused)) from None
        agent.tools = []
        _audit_agent(agent, actor, "agent.deleted", before)


def _in_use(refused: ProtectedError | RestrictedError) -> str:
    users = (
        refused.restricted_objects
        if isinstance(refused, RestrictedError)
        else refused.protected_objects
    )
    named: dict[str, list[str]] = {}
    for each in users:
        named.setdefault(str(each._meta.verbose_name_plural), []).append(str(each))
    uses = "; ".join(f"{kind} {', '.join(sorted(names)[:5])}" for kind, names in named.items())
    return f"this agent still answers {uses}: move them to another agent or remove them first"


# ---------------------------------------------------------------- session records


def session_record_start(
    *, session_id: str, workspace: Workspace, api_key: ApiKey, origin: str, mode: str,
    agent: Agent | None, end_user: str = "", agent_version: AgentVersion | None = None,
) -> Session:  # fmt: skip
    kept = privacy.session_privacy(workspace=workspace, agent=agent)
    return Session.objects.create(
        public_id=uuid.UUID(hex=session_id),
        workspace=workspace,
        api_key=api_key,
        agent=agent,
        agent_version=agent_version,
        origin=_no_nul(origin[:255]),
        end_user=end_user,
        mode=mode,
        zero_retention=kept.zero_retention,
        redacted=kept.redacted,
    )


def _transcript_text(session: Session, text: str) -> str:
    return _no_nul(privacy.redact(text) if session.redacted else text)


def session_record_append(*, session: Session, entries: list[tuple[str, str]]) -> None:
    """Add to the transcript, unless the session keeps nothing said (zero retention)."""
    if session.zero_retention:
        return
    TranscriptEntry.objects.bulk_create(
        TranscriptEntry(session=session, role=role, text=_transcript_text(session, text))
        for role, text in entries
    )


def _no_nul(text: str) -> str:
    # PostgreSQL text cannot hold NUL; a typed (or echoed) "\u0000" must not lose the row.
    return text.replace("\x00", "\ufffd")


def session_record_turn(*, session: Session, metrics: dict[str, Any]) -> None:
    TurnRecord.objects.create(session=session, turn_id=metrics["turnId"], metrics=metrics)


def session_record_count(*, session: Session, turns: int = 0, tool_calls: int = 0) -> None:
    Session.objects.filter(pk=session.pk, workspace_id=session.workspace_id).update(
        turn_count=F("turn_count") + turns, tool_call_count=F("tool_call_count") + tool_calls
    )


def session_record_tool_log(
    *, workspace_id: int, session_id: str, tool_name: str, console: str
) -> None:
    """A server tool's console output, kept with the session (never in the logs)."""
    session = Session.objects.filter(
        workspace_id=workspace_id, public_id=uuid.UUID(hex=session_id)
    ).first()
    if session is not None and not session.zero_retention:
        TranscriptEntry.objects.create(
            session=session,
            role=TranscriptEntry.Role.TOOL,
            text=_transcript_text(session, f"{tool_name} console:\n{console.rstrip()}"),
        )


def session_record_tool_call(
    *, session: Session, call_id: str, name: str, arguments: Any, status: str,
    result: str | None, error: str | None, duration_ms: float | None,
    bindings: list[SecretBinding] | None = None,
) -> ToolCallRecord:  # fmt: skip
    """Keep a settled tool call, with every spelling of ``bindings``' values masked.

    A call the sandbox ran comes masked already (its arguments too): ``bindings`` is then
    empty. Arguments of other calls (written by the model) and client tool results (sent
    by the browser) are masked here with the workspace's secrets (None: loaded here).
    """
    if session.zero_retention:  # which tool, how it ended, how long: nothing it was told
        arguments, result, error, bindings = {}, None, None, []
    if bindings is None:
        bindings = secret_bindings(workspace_id=session.workspace_id)
    return ToolCallRecord.objects.create(
        session=session,
        call_id=call_id[:100],
        name=name[:100],
        arguments=_stored_arguments(arguments, bindings),
        status=status,
        result=_stored_text(result, bindings),
        error=_stored_text(error, bindings),
        duration_ms=None if duration_ms is None else round(duration_ms, 1),
    )


def _stored_text(text: str | None, bindings: list[SecretBinding]) -> str:
    # Scrub before capping: a cut could leave a secret's prefix no pattern would match.
    return _capped(_no_nul(scrub(text, bindings) or ""))


def _stored_arguments(arguments: Any, bindings: list[SecretBinding]) -> Any:
    """JSON arguments stay JSON, less what ``jsonb`` refuses (a NUL, a lone surrogate: the
    model writes what the caller asks for); text that never parsed, nests past the parser's
    depth or got too long is kept as text."""
    raw = arguments if isinstance(arguments, str) else ""
    try:
        value = json.loads(raw) if isinstance(arguments, str) else arguments
        text = json.dumps(strings_mapped(value, storable), ensure_ascii=False)
    except (ValueError, RecursionError):
        return _stored_text(raw, bindings)
    text = scrub(text, bindings) or "null"
    if len(text.encode()) <= TOOL_TEXT_MAX_BYTES:
        try:
            return json.loads(text)
        except (ValueError, RecursionError):  # a mask landed where JSON cannot take it
            pass
    return _capped(text)


def _capped(text: str) -> str:
    encoded = text.encode()
    if len(encoded) <= TOOL_TEXT_MAX_BYTES:
        return text
    room = TOOL_TEXT_MAX_BYTES - len(_TRUNCATED.encode())
    return encoded[:room].decode(errors="ignore") + _TRUNCATED


SESSION_ERRORS_KEPT = 50  # per session: a provider down for a whole session repeats itself
ERROR_DETAIL_MAX = 2000


def session_record_error(
    *, session: Session, code: str, detail: str, bindings: list[SecretBinding]
) -> None:
    """Keep a provider failure's detail, up to ``SESSION_ERRORS_KEPT``: its keys already
    masked by the session's scrubber, the workspace's secrets (``bindings``) masked here by
    the same scrubber."""
    if SessionError.objects.filter(session=session).count() >= SESSION_ERRORS_KEPT:
        return
    scrub = Scrubber(Credential(b.value, f"[secret {b.name}]") for b in bindings)
    # A provider's answer may quote what was said: under zero retention, the code only.
    kept = "" if session.zero_retention else _no_nul(scrub(detail)[:ERROR_DETAIL_MAX])
    SessionError.objects.create(session=session, code=code[:40], detail=kept)


def session_record_end(*, session: Session, close_code: int | None) -> None:
    Session.objects.filter(pk=session.pk, workspace_id=session.workspace_id).update(
        ended_at=timezone.now(), close_code=close_code
    )


def session_record_end_orphans(*, workspace_id: int, session_ids: set[str], close_code: int) -> int:
    """Mark these live records ended (their process is gone); returns how many."""
    public_ids = [uuid.UUID(hex=sid) for sid in session_ids]
    return Session.objects.filter(
        workspace_id=workspace_id, public_id__in=public_ids, ended_at__isnull=True
    ).update(ended_at=timezone.now(), close_code=close_code)


# ---------------------------------------------------------------- session tokens

SESSION_TOKEN_PREFIX = "st_"
SESSION_TOKEN_LENGTH = 40


def _token_variables(variables: dict[str, Any]) -> dict[str, str]:
    """The same rules as `configure`'s variables."""
    try:
        message = protocol.ConfigureMessage.model_validate(
            {"type": "configure", "variables": variables}, by_alias=True, by_name=False
        )
    except PydanticError as exc:
        raise ValidationError({"variables": protocol.describe_errors(exc)}) from None
    return dict(message.variables or {})


def _token_page_variables(names: list[Any], fixed: dict[str, str]) -> list[str]:
    """The variables a token's page may set: names as `configure` spells them, none that
    the token fixes itself."""
    if not isinstance(names, list) or len(names) > protocol.VARIABLES_MAX:
        raise ValidationError({"page_variables": [f"at most {protocol.VARIABLES_MAX} names"]})
    wrong = [
        n for n in names if not isinstance(n, str) or not re.fullmatch(protocol.NAME_PATTERN, n)
    ]
    if wrong:
        raise ValidationError({"page_variables": [f"not a variable name: {str(wrong[0])[:64]!r}"]})
    both = sorted(set(names) & set(fixed))
    if both:
        raise ValidationError(
            {"page_variables": [f"fixed in variables, so the page cannot set: {', '.join(both)}"]}
        )
    return sorted(set(names))


def session_token_create(
    *,
    workspace: Workspace,
    agent: Agent,
    created_by_key: ApiKey,
    variables: dict[str, Any] | None = None,
    page_variables: list[str] | None = None,
    end_user: str = "",
    origin: str = "",
    ttl_s: int = 60,
    agent_version: AgentVersion | None = None,
) -> tuple[SessionToken, str]:
    """A single-use token for one session of ``agent`` (from ``origin`` only, if given);
    the page sets no variable but ``page_variables``. The plaintext is never stored."""
    if origin:
        try:
            origin = clean_origins([origin])[0]
        except ValidationError as error:
            raise ValidationError({"origin": error.messages}) from None
    fixed = _token_variables(variables or {})
    plaintext = SESSION_TOKEN_PREFIX + crypto.random_token(SESSION_TOKEN_LENGTH)
    now = timezone.now()
    token = SessionToken.objects.create(
        workspace=workspace,
        agent=agent,
        agent_version=agent_version,
        token_hash=crypto.token_digest(plaintext),
        created_by_key=created_by_key,
        variables=fixed,
        page_variables=_token_page_variables(page_variables or [], fixed),
        end_user=_no_nul(end_user),
        origin=origin,
        created_at=now,
        expires_at=now + timedelta(seconds=ttl_s),
    )
    return token, plaintext


def session_tokens_expired_delete(*, older_than: timedelta) -> int:
    """Forget tokens that expired more than ``older_than`` ago (used or not): nothing can
    redeem them, and a workspace minting many (a phone number's calls) leaves no pile."""
    cutoff = timezone.now() - older_than
    deleted, _ = SessionToken.objects.filter(expires_at__lt=cutoff).delete()
    return deleted


def session_token_redeem(*, token: str) -> SessionToken | None:
    """Use a token once: the one update that marks it used decides, across processes."""
    if not token.startswith(SESSION_TOKEN_PREFIX) or len(token) > 256 or "\x00" in token:
        return None
    now = timezone.now()
    digest = crypto.token_digest(token)
    claimed = SessionToken.objects.filter(
        token_hash=digest, used_at__isnull=True, expires_at__gt=now
    ).update(used_at=now)
    if not claimed:
        return None
    return (
        SessionToken.objects.select_related(
            "agent", "agent_version", "workspace", "created_by_key__workspace"
        )
        .filter(token_hash=digest)
        .first()
    )
