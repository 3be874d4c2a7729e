"""Each workspace's own provider accounts: writes, reads, and opening them for a session.

An LLM connection is an OpenAI-compatible endpoint (base URL, model, key) that owners
name, and agents choose by name; the oldest is the workspace's default. An embedding
connection is the same shape (an OpenAI-compatible ``/embeddings`` endpoint) that
knowledge bases choose by name (``knowledge_app``); sessions never open one. Speech
providers are one per kind: each provider whose folder declares a credential kind
(``registry.credential_specs``). Keys are sealed
like secrets, under their own label, and only ``provider_credentials_open`` (used when a
session is built or a connection is tested) ever decrypts them.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone

import egress
from core.outbound import clean_outbound_url
from engine.providers import registry
from secrets_app.audit import SYSTEM, Actor, audit_record, url_shown
from secrets_app.models import ProviderCredential, Workspace
from secrets_app.services import sealed_open, sealed_store
from secrets_app.validators import validate_secret_value

logger = logging.getLogger(__name__)

Kind = ProviderCredential.Kind
ENDPOINT_KINDS = (Kind.LLM, Kind.EMBEDDING)  # named endpoints; every other kind is speech
CONNECTION_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?\Z")
MODEL_MAX = 100


@dataclass(frozen=True)
class LLMConnection:
    name: str
    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class SpeechAccount:
    kind: str
    api_key: str | None = field(default=None, repr=False)
    url: str = ""


@dataclass(frozen=True)
class WorkspaceProviders:
    """A workspace's provider accounts, keys decrypted: held only while building providers."""

    llms: tuple[LLMConnection, ...] = ()  # oldest first: the first is the default
    speech: dict[str, SpeechAccount] = field(default_factory=dict)

    def llm(self, name: str | None) -> LLMConnection | None:
        """The named connection, or the default one (None: the workspace has none)."""
        if not name:
            return self.llms[0] if self.llms else None
        return next((c for c in self.llms if c.name == name), None)

    def keys(self) -> list[str]:
        """Every key, to mask them in anything shown (error messages may quote them)."""
        found = [c.api_key for c in self.llms] + [s.api_key for s in self.speech.values()]
        return [key for key in found if key]


# ---------------------------------------------------------------- reads


def provider_credential_list(*, workspace: Workspace) -> QuerySet[ProviderCredential]:
    return ProviderCredential.objects.filter(workspace=workspace).defer("ciphertext")


def provider_credential_get(*, workspace: Workspace, credential_id: int) -> ProviderCredential:
    return get_object_or_404(ProviderCredential, workspace=workspace, pk=credential_id)


def llm_connection_names(*, workspace: Workspace) -> list[str]:
    rows = provider_credential_list(workspace=workspace).filter(kind=Kind.LLM)
    return [row.name for row in rows]


@dataclass(frozen=True)
class ProviderNames:
    """What a workspace configured, without any key: for forms that offer the choice."""

    llms: list[str] = field(default_factory=list)  # oldest (the default) first
    speech: frozenset[str] = frozenset()  # speech kinds with the workspace's own key


def speech_kinds() -> list[str]:
    """The speech providers a workspace may store an account for, in the dashboard's order."""
    return [spec.name for spec in registry.credential_specs()]


def provider_names(*, workspace: Workspace) -> ProviderNames:
    rows = list(provider_credential_list(workspace=workspace).only("kind", "name"))
    return ProviderNames(
        llms=[row.name for row in rows if row.kind == Kind.LLM],
        speech=frozenset(row.kind for row in rows if row.kind not in ENDPOINT_KINDS),
    )


def _opened_key(row: ProviderCredential) -> str | None:
    return sealed_open(row) if row.has_key else None


def provider_credentials_open(*, workspace_id: int) -> WorkspaceProviders:
    """The workspace's accounts with their keys, for building a session's providers."""
    rows = ProviderCredential.objects.filter(workspace_id=workspace_id)
    llms = tuple(
        LLMConnection(row.name, row.base_url, row.model, _opened_key(row))
        for row in rows
        if row.kind == Kind.LLM
    )
    speech = {
        row.kind: SpeechAccount(row.kind, _opened_key(row), row.base_url)
        for row in rows
        if row.kind not in ENDPOINT_KINDS
    }
    return WorkspaceProviders(llms=llms, speech=speech)


def credential_open(*, credential: ProviderCredential) -> str | None:
    """One account's key (a connection test, a knowledge base's embeddings)."""
    return _opened_key(credential)


def embedding_connection_get(
    *, workspace_id: int, name: str, lock: bool = False
) -> ProviderCredential | None:
    """The workspace's embedding connection of that name (None: it has none so named);
    ``lock``: its row locked until the caller's transaction ends."""
    rows = ProviderCredential.objects.filter(
        workspace_id=workspace_id, kind=Kind.EMBEDDING, name=name
    )
    return (rows.select_for_update() if lock else rows).first()


# ---------------------------------------------------------------- writes


def _clean_name(name: str) -> str:
    name = (name or "").strip()
    if not CONNECTION_NAME.match(name):
        raise ValidationError(
            {"name": ["Use lowercase letters, digits and '-' (like openai or local-ollama)."]}
        )
    return name


def _clean_key(api_key: str | None) -> str | None:
    if api_key in (None, ""):
        return None
    try:
        validate_secret_value(api_key)
    except ValidationError as error:
        raise ValidationError({"api_key": [f"The key {m}." for m in error.messages]}) from None
    return api_key


def _clean_url(value: str, *, schemes: tuple[str, ...], what: str) -> str:
    try:
        return clean_outbound_url(value, schemes=schemes, what=what)
    except ValidationError as error:
        raise ValidationError({"base_url": error.messages}) from None


def _audit_target(row: ProviderCredential) -> str:
    if row.kind == Kind.LLM:
        return f"LLM connection {row.name}"
    if row.kind == Kind.EMBEDDING:
        return f"Embedding connection {row.name}"
    return row.get_kind_display()


def _audited(row: ProviderCredential) -> dict[str, object]:
    """What the log says of an account: where it points and which model, never its key."""
    url = url_shown(row.base_url) if row.base_url else ""
    return {"kind": row.kind, "name": row.name, "url": url, "model": row.model}


@transaction.atomic
def _save(
    *,
    workspace: Workspace,
    kind: str,
    name: str,
    api_key: str | None,
    actor: Actor,
    **fields: str,
) -> ProviderCredential:
    """Create or update; a key left as None keeps the one already stored."""
    row = (
        ProviderCredential.objects.select_for_update()
        .filter(workspace=workspace, kind=kind, name=name)
        .first()
    ) or ProviderCredential(workspace=workspace, kind=kind, name=name)
    created, before = row.pk is None, _audited(row)
    if api_key is None and not created and row.ciphertext:
        _key_stays_with_its_origin(row.base_url, fields.get("base_url", row.base_url))
    for attribute, value in fields.items():
        setattr(row, attribute, value)
    if api_key is not None:
        sealed_store(row, api_key)
    row.updated_at = timezone.now()
    row.checked_at, row.check_ok, row.check_message = None, None, ""
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:
        raise ValidationError({"name": [f"A connection named {name} exists."]}) from None
    logger.info("provider credential saved: kind=%s workspace=%s", kind, workspace.pk)
    after = _audited(row)
    changed = {name: value for name, value in after.items() if created or before[name] != value}
    audit_record(
        workspace=workspace, actor=actor, target=_audit_target(row),
        action="provider.created" if created else "provider.updated",
        details={**changed, "key_saved": api_key is not None},
    )  # fmt: skip
    return row


def _origin(url: str) -> tuple[str, str, int] | None:
    try:
        target = egress.parse(url, schemes=("https", "http", "wss", "ws"))
    except egress.InvalidURL:
        return None
    return (target.scheme, target.host, target.port)


def _key_stays_with_its_origin(saved_url: str, new_url: str) -> None:
    """A saved key goes only where it was saved for: a URL moved to another scheme, host or
    port needs the key typed again. Otherwise anyone allowed to edit the URL (an API key
    with a narrow scope, an admin) could send a key they may not read to a host of theirs."""
    if saved_url and _origin(saved_url) != _origin(new_url):
        raise ValidationError(
            {"api_key": ["Enter the key again: the URL now points to another host, scheme "
                         "or port, and a saved key goes only where it was saved for."]}
        )  # fmt: skip


def _clean_model(model: str) -> str:
    model = (model or "").strip()
    if not model or len(model) > MODEL_MAX:
        raise ValidationError({"model": [f"Name the model (at most {MODEL_MAX} characters)."]})
    return model


def provider_endpoint_set(
    *,
    workspace: Workspace,
    kind: str,
    name: str,
    base_url: str,
    model: str,
    api_key: str | None = None,
    actor: Actor = SYSTEM,
) -> ProviderCredential:
    """An OpenAI-compatible endpoint of ``kind`` (an LLM's, or an ``/embeddings`` one for
    knowledge bases), created or updated by name; a key left as None keeps the saved one."""
    cleaners: dict[str, Callable[[], str | None]] = {
        "name": lambda: _clean_name(name),
        "base_url": lambda: _clean_url(base_url, schemes=("https", "http"), what="base URL"),
        "model": lambda: _clean_model(model),
        "api_key": lambda: _clean_key(api_key),
    }
    cleaned: dict[str, Any] = {}  # each cleaner's own type
    errors: dict[str, list[str]] = {}
    for field_name, clean in cleaners.items():  # every field's problem at once
        try:
            cleaned[field_name] = clean()
        except ValidationError as error:
            errors.update(error.message_dict)
    if errors:
        raise ValidationError(errors)
    return _save(
        workspace=workspace,
        kind=kind,
        name=cleaned["name"],
        api_key=cleaned["api_key"],
        base_url=cleaned["base_url"].rstrip("/"),
        model=cleaned["model"],
        actor=actor,
    )


# An OpenAI-compatible LLM endpoint of the workspace (created, or updated by name).
provider_llm_set = functools.partial(provider_endpoint_set, kind=Kind.LLM)


def provider_speech_set(
    *,
    workspace: Workspace,
    kind: str,
    api_key: str | None = None,
    url: str = "",
    actor: Actor = SYSTEM,
) -> ProviderCredential:
    """A speech provider's key (and, where its credential kind asks, its URL: Orpheus)."""
    try:
        account_url = registry.credential_spec(kind).credential_url
    except registry.UnknownProvider:
        raise ValidationError({"kind": [f"{kind!r} is not a speech provider."]}) from None
    key = _clean_key(api_key)
    exists = ProviderCredential.objects.filter(workspace=workspace, kind=kind).exists()
    if key is None and not exists:
        raise ValidationError({"api_key": ["Enter the provider's API key."]})
    base_url = ""
    if account_url is not None:
        base_url = _clean_url(url, schemes=account_url.schemes, what=account_url.what)
    return _save(
        workspace=workspace, kind=kind, name=kind, api_key=key, base_url=base_url, actor=actor
    )


def provider_credential_delete(*, credential: ProviderCredential, actor: Actor = SYSTEM) -> None:
    shown = _audited(credential)
    credential.delete()
    logger.info(
        "provider credential deleted: kind=%s workspace=%s",
        credential.kind,
        credential.workspace_id,
    )
    audit_record(
        workspace=credential.workspace, actor=actor, action="provider.deleted",
        target=_audit_target(credential), details=shown,
    )  # fmt: skip


def provider_credential_checked(
    *, credential: ProviderCredential, ok: bool, message: str, actor: Actor = SYSTEM
) -> ProviderCredential:
    """Remember a connection test's outcome; the log says who tested which account, from
    where, and whether it answered (not the words: a provider may quote anything)."""
    audit_record(
        workspace=credential.workspace, actor=actor, action="provider.tested",
        target=_audit_target(credential),
        details={**_audited(credential), "ok": ok},
    )  # fmt: skip
    credential.checked_at, credential.check_ok = timezone.now(), ok
    credential.check_message = message[:500]
    ProviderCredential.objects.filter(
        pk=credential.pk, workspace_id=credential.workspace_id
    ).update(checked_at=credential.checked_at, check_ok=ok, check_message=credential.check_message)
    return credential
