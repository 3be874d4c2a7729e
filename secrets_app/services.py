"""Writes for tenancy and credentials. Every function takes the tenant explicitly."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Protocol

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from secrets_app import crypto, selectors
from secrets_app import scopes as key_scopes
from secrets_app.audit import SYSTEM, Actor, audit_record
from secrets_app.models import ApiKey, Invitation, Membership, Secret, User, Workspace
from secrets_app.signals import api_key_disabled
from secrets_app.validators import (
    clean_agent_slugs,
    clean_hosts,
    clean_origins,
    validate_secret_name,
    validate_secret_value,
)

logger = logging.getLogger(__name__)

KEY_RANDOM_LENGTH = 32
KEY_PREFIXES: dict[str, str] = {ApiKey.Kind.PUBLISHABLE: "pk_", ApiKey.Kind.SECRET: "sk_"}


class KeyRejected(Exception):
    """An API key cannot be used. ``reason`` is safe to show to the caller."""

    def __init__(self, reason: str, *, code: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


# ---------------------------------------------------------------- users and workspaces


def user_get_or_create(*, email: str, password: str | None = None) -> tuple[User, bool]:
    """A user made by an operator (commands, tests): the address counts as verified.
    People who sign up themselves go through ``accounts.user_sign_up``."""
    user = User.objects.filter(email__iexact=email).first()
    if user is not None:
        return user, False
    user = User.objects.create_user(email=email, password=password)
    user.email_verified_at = timezone.now()
    user.save(update_fields=["email_verified_at"])
    return user, True


@transaction.atomic
def workspace_create(*, name: str, owner: User, actor: Actor = SYSTEM) -> Workspace:
    workspace = Workspace.objects.create(name=name)
    Membership.objects.create(user=owner, workspace=workspace, role=Membership.Role.OWNER)
    audit_record(workspace=workspace, actor=actor, action="workspace.created", target=name)
    return workspace


def membership_add(*, workspace: Workspace, user: User, role: str) -> Membership:
    membership, _ = Membership.objects.update_or_create(
        workspace=workspace, user=user, defaults={"role": role}
    )
    return membership


# ---------------------------------------------------------------- API keys


def _new_key_material(kind: str) -> tuple[str, dict[str, str]]:
    plaintext = KEY_PREFIXES[kind] + crypto.random_token(KEY_RANDOM_LENGTH)
    fields = {
        "key_hash": crypto.api_key_hash(plaintext),
        "prefix": plaintext[:7],
        "last4": plaintext[-4:],
        "publishable_key": plaintext if kind == ApiKey.Kind.PUBLISHABLE else "",
    }
    return plaintext, fields


def _refuse_unverified(actor: Actor) -> None:
    """A person makes keys (by creating, rolling, opening the playground) only once their
    address is verified: a throwaway account never holds a working key."""
    if actor.user is not None and actor.user.email_verified_at is None:
        raise KeyRejected(
            "verify your email address first (the link we mailed you); until then an "
            "account cannot make keys",
            code="email_unverified",
        )


def _locked(*keys: ApiKey | None) -> dict[int, ApiKey]:
    """The keys read again and locked until the transaction ends, always in id order (two
    requests locking the same two keys in opposite orders would deadlock)."""
    ids = {key.pk for key in keys if key is not None}
    rows = ApiKey.objects.select_for_update().filter(pk__in=ids).order_by("pk")
    return {row.pk: row for row in rows}


def _acting_key(actor: Actor, locked: dict[int, ApiKey]) -> ApiKey | None:
    """The key that acts, read under its lock (``locked``): a key revoked, expired or
    narrowed a moment ago acts with what it holds now. None: a person (they hold all)."""
    if actor.key is None:
        return None
    acting = locked.get(actor.key.pk)
    if acting is None or acting.status() != "active":
        raise KeyRejected("unknown, revoked or expired API key", code="invalid_key")
    if not key_scopes.grants(acting.scopes, "keys"):
        raise KeyRejected("this key has no 'keys' scope", code="missing_scope")
    return acting


def _refuse_wider_targets(actor: Actor, targets: list[ApiKey], locked: dict[int, ApiKey]) -> None:
    """A key changes, rolls or revokes another key only if it holds every scope that key
    holds: a leaked ``keys``-only key cannot narrow or disable the keys that do the work.
    A key may always act on itself (narrow it, revoke it), but not on the keys it made
    that are wider than it is now (revoking itself would take those down too)."""
    acting = _acting_key(actor, locked)
    if acting is None:
        return
    others = [key for key in targets if key.pk != acting.pk]
    held = [scope for key in others for scope in key.scopes]
    lacking = key_scopes.beyond(acting.scopes, key_scopes.clean_scopes(held))
    if lacking:
        wider = [key.display for key in others if key_scopes.beyond(acting.scopes, key.scopes)]
        raise KeyRejected(
            f"{', '.join(wider)} would be changed or revoked and holds more than this key: a "
            "key can only change, roll or revoke keys whose scopes it holds itself; this key "
            f"lacks {', '.join(lacking)}",
            code="missing_scope",
        )


def _refuse_beyond_actor(actor: Actor, wanted: list[str], locked: dict[int, ApiKey]) -> None:
    """A key can only hand on scopes it holds itself (people in the dashboard hold all)."""
    acting = _acting_key(actor, locked)
    if acting is None:
        return
    beyond = key_scopes.beyond(acting.scopes, wanted)
    if beyond:
        raise KeyRejected(
            f"a key can only give scopes it holds itself; this key lacks {', '.join(beyond)}",
            code="missing_scope",
        )


def _key_scopes(kind: str, wanted: list[str] | None, actor: Actor) -> list[str]:
    """A new key's scopes (publishable keys: none), checked against the acting key's."""
    chosen: list[str] = []
    if kind == ApiKey.Kind.SECRET:
        chosen = key_scopes.clean_scopes(key_scopes.DEFAULT if wanted is None else wanted)
    _refuse_beyond_actor(actor, chosen, _locked(actor.key))
    return chosen


@transaction.atomic
def api_key_create(
    *,
    workspace: Workspace,
    kind: str,
    label: str = "",
    allowed_origins: list[str] | None = None,
    allowed_agents: list[str] | None = None,
    allow_inline_config: bool = False,
    allow_inline_tool_code: bool = False,
    tokens_only: bool = False,
    scopes: list[str] | None = None,
    expires_at: datetime | None = None,
    actor: Actor = SYSTEM,
) -> tuple[ApiKey, str]:
    """Create a key; returns it with its plaintext, which is never available again.
    KeyRejected: the acting person is unverified, or the acting key may not make it."""
    _refuse_unverified(actor)
    key, plaintext = _api_key_make(
        workspace=workspace,
        kind=kind,
        label=label,
        allowed_origins=allowed_origins,
        allowed_agents=allowed_agents,
        allow_inline_config=allow_inline_config,
        allow_inline_tool_code=allow_inline_tool_code,
        tokens_only=tokens_only,
        scopes=_key_scopes(kind, scopes, actor),
        expires_at=expires_at,
        actor=actor,
    )
    audit_record(
        workspace=workspace, actor=actor, action="key.created", target=key.display,
        details=_key_settings(key),
    )  # fmt: skip
    return key, plaintext


def _key_settings(key: ApiKey) -> dict[str, object]:
    if key.kind == ApiKey.Kind.SECRET:
        return {"kind": key.kind, "label": key.label, "scopes": key.scopes}
    return {
        "kind": key.kind, "label": key.label, "allowed_origins": key.allowed_origins,
        "allowed_agents": key.allowed_agents, "allow_inline_config": key.allow_inline_config,
        "allow_inline_tool_code": key.allow_inline_tool_code, "tokens_only": key.tokens_only,
    }  # fmt: skip


def _api_key_make(
    *,
    workspace: Workspace,
    kind: str,
    label: str,
    allowed_origins: list[str] | None,
    allowed_agents: list[str] | None,
    allow_inline_config: bool,
    allow_inline_tool_code: bool,
    tokens_only: bool,
    scopes: list[str],
    expires_at: datetime | None,
    actor: Actor,
    rolled_from: ApiKey | None = None,
) -> tuple[ApiKey, str]:
    if kind not in KEY_PREFIXES:
        raise ValueError(f"unknown key kind {kind!r}")
    _refuse_unverified(actor)
    publishable = kind == ApiKey.Kind.PUBLISHABLE
    plaintext, material = _new_key_material(kind)
    key = ApiKey.objects.create(
        workspace=workspace,
        kind=kind,
        label=label,
        allowed_origins=clean_origins(allowed_origins or []) if publishable else [],
        allowed_agents=clean_agent_slugs(allowed_agents or []) if publishable else [],
        allow_inline_config=allow_inline_config and publishable,
        allow_inline_tool_code=allow_inline_tool_code and publishable,
        tokens_only=tokens_only and publishable,
        scopes=scopes,
        expires_at=expires_at,
        rolled_from=rolled_from,
        created_by=actor.user,
        created_by_key=actor.key,
        **material,
    )
    logger.info("api key created: id=%s kind=%s workspace=%s", key.pk, kind, workspace.pk)
    return key, plaintext


@transaction.atomic
def api_key_update(
    *,
    key: ApiKey,
    label: str | None = None,
    allowed_origins: list[str] | None = None,
    allowed_agents: list[str] | None = None,
    allow_inline_config: bool | None = None,
    allow_inline_tool_code: bool | None = None,
    tokens_only: bool | None = None,
    scopes: list[str] | None = None,
    actor: Actor = SYSTEM,
) -> ApiKey:
    """Change a key's settings. KeyRejected: the acting key may not (scopes it lacks)."""
    locked = _locked(key, actor.key)
    key = locked[key.pk]
    secret = key.kind == ApiKey.Kind.SECRET
    wanted = key_scopes.clean_scopes(scopes) if secret and scopes is not None else None
    _refuse_wider_targets(actor, [key], locked)
    _refuse_beyond_actor(actor, wanted or [], locked)
    before = _key_settings(key)
    if label is not None:
        key.label = label
    if key.kind == ApiKey.Kind.PUBLISHABLE:
        if allowed_origins is not None:
            key.allowed_origins = clean_origins(allowed_origins)
        if allowed_agents is not None:
            key.allowed_agents = clean_agent_slugs(allowed_agents)
        for name, value in (
            ("allow_inline_config", allow_inline_config),
            ("allow_inline_tool_code", allow_inline_tool_code),
            ("tokens_only", tokens_only),
        ):
            if value is not None:
                setattr(key, name, value)
    elif wanted is not None:
        key.scopes = wanted
    key.save()
    after = _key_settings(key)
    changed = {name: after[name] for name in after if after[name] != before[name]}
    if changed:
        audit_record(
            workspace=key.workspace, actor=actor, action="key.updated", target=key.display,
            details=changed,
        )  # fmt: skip
    return key


PLAYGROUND_KEY_LABEL = "Dashboard playground"


@transaction.atomic
def api_key_for_playground(*, workspace: Workspace, origin: str, actor: Actor) -> ApiKey:
    """The publishable key the dashboard's playground talks with.

    Made on first use, per dashboard origin: it works from that origin only, for saved
    agents only (no inline config), so it is worthless anywhere else. KeyRejected: the
    person is unverified (they get no key, not even one made before).
    """
    _refuse_unverified(actor)
    origin = clean_origins([origin])[0]
    workspace_lock(workspace_id=workspace.pk)  # one maker at once
    candidates = ApiKey.objects.filter(
        workspace=workspace, kind=ApiKey.Kind.PUBLISHABLE, label=PLAYGROUND_KEY_LABEL
    )
    for key in candidates:
        if key.status() == "active" and key.allowed_origins == [origin]:
            return key
    key, _ = api_key_create(
        workspace=workspace,
        kind=ApiKey.Kind.PUBLISHABLE,
        label=PLAYGROUND_KEY_LABEL,
        allowed_origins=[origin],
        actor=actor,
    )
    return key


@transaction.atomic
def api_key_roll(
    *, key: ApiKey, expires_at: datetime | None = None, actor: Actor = SYSTEM
) -> tuple[ApiKey, str]:
    """Replace a key: same settings, new plaintext; the old key works until ``expires_at``.

    KeyRejected: the key is not active, the person is unverified, or the acting key does
    not hold every scope of the key it rolls (a successor never holds more than its maker).
    """
    _refuse_unverified(actor)
    locked = _locked(key, actor.key)
    old = locked[key.pk]
    _refuse_beyond_actor(actor, list(old.scopes), locked)
    if old.status() != "active":
        raise KeyRejected("only an active key can be rolled", code="key_inactive")
    now = timezone.now()
    old.expires_at = max(expires_at, now) if expires_at is not None else now
    old.save(update_fields=["expires_at"])
    new, plaintext = _api_key_make(
        workspace=old.workspace,
        kind=old.kind,
        label=old.label,
        allowed_origins=old.allowed_origins,
        allowed_agents=old.allowed_agents,
        allow_inline_config=old.allow_inline_config,
        allow_inline_tool_code=old.allow_inline_tool_code,
        tokens_only=old.tokens_only,
        scopes=list(old.scopes),
        expires_at=None,
        actor=actor,
        rolled_from=old,
    )
    audit_record(
        workspace=old.workspace, actor=actor, action="key.rolled", target=old.display,
        details={"new_key": new.display, "old_key_works_until": old.expires_at.isoformat()},
    )  # fmt: skip
    transaction.on_commit(lambda: api_key_disabled.send(ApiKey, key=old, at=old.expires_at))
    return new, plaintext


@transaction.atomic
def api_key_revoke(*, key: ApiKey, actor: Actor = SYSTEM) -> ApiKey:
    """Revoke a key and every key it made (recursively); their live sessions end.

    KeyRejected: the acting key lacks a scope of a key this would revoke (itself aside)."""
    locked = _locked(key, actor.key)
    tree = _key_tree(locked[key.pk])
    live = [each for each in tree if each.revoked_at is None]  # itself aside (below)
    _refuse_wider_targets(actor, live, locked)
    return _revoke_announced(key, tree, actor)


def line_key_create(*, workspace: Workspace, label: str, agent: str, actor: Actor) -> ApiKey:
    """A phone number's own key: publishable, for session tokens of one agent only, no
    scopes. Whoever may manage numbers makes it with the number (no 'keys' scope needed:
    it can do nothing its number cannot); no key is its maker, so revoking the key that
    added the number leaves the line answering. The audit row names the actor."""
    key, _ = _api_key_make(
        workspace=workspace, kind=ApiKey.Kind.PUBLISHABLE, label=label, allowed_origins=None,
        allowed_agents=[agent], allow_inline_config=False, allow_inline_tool_code=False,
        tokens_only=True, scopes=[], expires_at=None, actor=replace(actor, key=None),
    )  # fmt: skip
    audit_record(
        workspace=workspace, actor=actor, action="key.created", target=key.display,
        details=_key_settings(key),
    )  # fmt: skip
    return key


def line_key_revoke(*, key: ApiKey, actor: Actor) -> ApiKey:
    """Revoke a phone number's own key with the number (see ``line_key_create``)."""
    if not key.tokens_only or key.scopes:
        raise ValueError("only a number's own key is revoked this way")
    return _revoke_announced(key, [_locked(key)[key.pk]], actor)


def _revoke_announced(key: ApiKey, tree: list[ApiKey], actor: Actor) -> ApiKey:
    revoked = _revoke(tree, timezone.now())
    for each in revoked:
        logger.info("api key revoked: id=%s workspace=%s", each.pk, each.workspace_id)
        audit_record(
            workspace=each.workspace, actor=actor, action="key.revoked", target=each.display,
            details={} if each.pk == key.pk else {"because": f"made by {key.display}"},
        )  # fmt: skip
    for each in revoked:
        transaction.on_commit(partial(api_key_disabled.send, ApiKey, key=each, at=None))
    key.refresh_from_db(fields=["revoked_at"])
    return key


def _key_tree(key: ApiKey) -> list[ApiKey]:
    """``key`` and every key it made, and the keys those made."""
    tree: list[ApiKey] = []
    pending = [key]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if current.pk in seen:
            continue
        seen.add(current.pk)
        tree.append(current)
        pending += list(
            ApiKey.objects.filter(workspace_id=key.workspace_id, created_by_key=current)
        )
    return tree


def _revoke(tree: list[ApiKey], now: datetime) -> list[ApiKey]:
    revoked: list[ApiKey] = []
    for current in tree:
        if current.revoked_at is None:
            ApiKey.objects.filter(pk=current.pk, workspace_id=current.workspace_id).update(
                revoked_at=now
            )
            current.revoked_at = now
            revoked.append(current)
    return revoked


def api_key_authenticate(*, plaintext: str, kind: str) -> ApiKey:
    """The active key of ``kind`` for ``plaintext``, or KeyRejected saying why not."""
    if not plaintext:
        raise KeyRejected("an API key is required", code="missing_key")
    key = (
        ApiKey.objects.select_related("workspace", "created_by")
        .filter(key_hash=crypto.api_key_hash(plaintext))
        .first()
    )
    if key is None or key.status() != "active":
        raise KeyRejected("unknown, revoked or expired API key", code="invalid_key")
    if key.created_by is not None and key.created_by.email_verified_at is None:
        # Made by an unverified person (before every path refused them): never usable.
        raise KeyRejected(
            "this key's creator has not verified their email address", code="invalid_key"
        )
    if key.kind != kind:
        if kind == ApiKey.Kind.SECRET:
            raise KeyRejected(
                "a publishable key (pk_…) cannot call the REST API; use a secret key (sk_…)",
                code="wrong_key_kind",
            )
        raise KeyRejected(
            "a secret key (sk_…) must never be used in a browser; use a publishable key (pk_…)",
            code="wrong_key_kind",
        )
    _touch_last_used(key)
    return key


def _touch_last_used(key: ApiKey) -> None:
    # At most one write per key per precision window, not one per request.
    now = timezone.now()
    precision = timedelta(seconds=settings.API_KEY_LAST_USED_PRECISION_S)
    if key.last_used_at is None or now - key.last_used_at >= precision:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now


# ---------------------------------------------------------------- secrets


class Sealed(Protocol):
    """A row holding a value sealed by the keyring: a secret, a provider key, a webhook's
    signing secret. ``associated_data`` binds the ciphertext to the row's tenant and kind."""

    key_id: str
    ciphertext: Any

    def associated_data(self) -> bytes: ...


def sealed_store(row: Sealed, value: str) -> None:
    """Seal ``value`` into ``row`` under the newest key (the caller saves the row)."""
    row.key_id, row.ciphertext = crypto.keyring().encrypt(
        value.encode(), associated_data=row.associated_data()
    )


def sealed_open(row: Sealed) -> str:
    """The plaintext sealed in ``row``. Never logged, never rendered."""
    plaintext = crypto.keyring().decrypt(
        row.key_id, bytes(row.ciphertext), associated_data=row.associated_data()
    )
    return plaintext.decode()


def _seal(*, workspace_id: int, name: str, value: str) -> tuple[str, bytes]:
    return crypto.keyring().encrypt(
        value.encode(),
        associated_data=crypto.secret_associated_data(workspace_id=workspace_id, name=name),
    )


def workspace_lock(*, workspace_id: int) -> None:
    """Hold the workspace's row until the transaction ends: a limit counted under it and the
    rows written after the count are one step for requests that arrive at the same instant
    (SQLite serialises writes anyway)."""
    Workspace.objects.select_for_update().filter(pk=workspace_id).exists()


def _check_room(workspace: Workspace, name: str) -> None:
    """A workspace's secrets are counted: every fetch of its tools is checked against all
    of them, so their number has a ceiling."""
    limit = settings.SECRETS_PER_WORKSPACE_MAX
    workspace_lock(workspace_id=workspace.pk)
    others = Secret.objects.filter(workspace=workspace).exclude(name=name)
    if others.count() >= limit:
        raise ValidationError(
            {"name": [f"a workspace has at most {limit} secrets; delete one you no longer use"]}
        )


@transaction.atomic
def secret_set(
    *,
    workspace: Workspace,
    name: str,
    value: str,
    allowed_hosts: list[str] | None = None,
    readable_by_code: bool | None = None,
    actor: Actor = SYSTEM,
) -> tuple[Secret, bool]:
    """Create or replace a secret. Returns (secret, created).

    ``allowed_hosts`` and ``readable_by_code`` left as None keep what a replaced secret
    had (a new one: no hosts, not readable), so replacing a value never widens access.
    """
    validate_secret_name(name)
    validate_secret_value(value)
    _check_room(workspace, name)
    key_id, ciphertext = _seal(workspace_id=workspace.pk, name=name, value=value)
    defaults: dict[str, object] = {
        "ciphertext": ciphertext,
        "key_id": key_id,
        "updated_at": timezone.now(),
    }
    if allowed_hosts is not None:
        defaults["allowed_hosts"] = clean_hosts(allowed_hosts)
    if readable_by_code is not None:
        defaults["readable_by_code"] = readable_by_code
    secret, created = Secret.objects.select_for_update().update_or_create(
        workspace=workspace, name=name, defaults=defaults
    )
    logger.info("secret %s: workspace=%s", "created" if created else "replaced", workspace.pk)
    audit_record(
        workspace=workspace, actor=actor, target=name,
        details={"allowed_hosts": secret.allowed_hosts,
                 "readable_by_code": secret.readable_by_code},
        action="secret.created" if created else "secret.replaced",
    )  # fmt: skip
    return secret, created


def secret_update_hosts(
    *,
    secret: Secret,
    allowed_hosts: list[str],
    readable_by_code: bool | None = None,
    actor: Actor = SYSTEM,
) -> Secret:
    """Where the value may be sent, and whether saved handlers may read it."""
    secret.allowed_hosts = clean_hosts(allowed_hosts)
    if readable_by_code is not None:
        secret.readable_by_code = readable_by_code
    secret.updated_at = timezone.now()
    secret.save(update_fields=["allowed_hosts", "readable_by_code", "updated_at"])
    audit_record(
        workspace=secret.workspace, actor=actor, action="secret.access_changed",
        target=secret.name,
        details={"allowed_hosts": secret.allowed_hosts,
                 "readable_by_code": secret.readable_by_code},
    )  # fmt: skip
    return secret


def secret_delete(*, secret: Secret, actor: Actor = SYSTEM) -> None:
    workspace, name = secret.workspace, secret.name
    secret.delete()
    audit_record(workspace=workspace, actor=actor, action="secret.deleted", target=name)


def secret_resolve(*, secret: Secret) -> str:
    """The plaintext value. Only the sandbox worker and rotation call this."""
    return sealed_open(secret)


@dataclass
class RotationReport:
    rotated: int = 0
    already_current: int = 0
    failed: list[str] = field(default_factory=list)  # "workspace_id/NAME", never values


# Every model that holds sealed values, as "app_label.Model" (models of later apps too).
SEALED_MODELS = (
    "secrets_app.Secret",
    "secrets_app.ProviderCredential",
    "webhooks_app.WebhookEndpoint",
    "sessions_app.Recording",  # each recording's data key
)


def secrets_rotate() -> RotationReport:
    """Re-encrypt every sealed value (secrets, provider keys, webhook signing secrets,
    recordings' data keys) under the newest keyring key. Safe to run twice."""
    report = RotationReport()
    current = crypto.keyring().current_id
    for label in SEALED_MODELS:
        model = apps.get_model(label)
        sealed = model.objects.exclude(key_id="")
        report.already_current += sealed.filter(key_id=current).count()
        stale = sealed.exclude(key_id=current).values_list("pk", "workspace_id")
        for row_id, workspace_id in stale:
            _rotate_one(model, row_id, workspace_id, report)
    return report


@transaction.atomic
def _rotate_one(model: Any, row_id: int, workspace_id: int, report: RotationReport) -> None:
    row = model.objects.select_for_update().get(pk=row_id, workspace_id=workspace_id)
    try:
        value = sealed_open(row)
    except crypto.DecryptionError:
        report.failed.append(f"{row.workspace_id}/{getattr(row, 'name', row.pk)}")
        return
    sealed_store(row, value)
    row.save(update_fields=["key_id", "ciphertext"])
    report.rotated += 1


# ---------------------------------------------------------------- members and invitations

INVITATION_TTL = timedelta(days=7)
INVITATION_TOKEN_LENGTH = 40
_LAST_OWNER = "A workspace needs an owner: make another member an owner first."


@transaction.atomic
def invitation_create(
    *, workspace: Workspace, email: str, role: str, invited_by: User | None, actor: Actor = SYSTEM
) -> tuple[Invitation, str]:
    """A new invitation and its token (the link's secret part, never available again).

    A pending invitation to the same address is revoked, so only the newest link works.
    """
    email = email.strip().lower()
    if role not in Membership.Role.values:
        raise ValidationError({"role": f"{role!r} is not a role"})
    if Membership.objects.filter(workspace=workspace, user__email__iexact=email).exists():
        raise ValidationError({"email": f"{email} is already a member of this workspace."})
    now = timezone.now()
    Invitation.objects.filter(
        workspace=workspace,
        email__iexact=email,
        accepted_at__isnull=True,
        revoked_at__isnull=True,
    ).update(revoked_at=now)
    token = crypto.random_token(INVITATION_TOKEN_LENGTH)
    invitation = Invitation.objects.create(
        workspace=workspace,
        email=email,
        role=role,
        token_hash=Invitation.hash_token(token),
        invited_by=invited_by,
        created_at=now,
        expires_at=now + INVITATION_TTL,
    )
    logger.info("invitation created: id=%s workspace=%s", invitation.pk, workspace.pk)
    audit_record(
        workspace=workspace, actor=actor, action="member.invited", target=email,
        details={"role": role},
    )  # fmt: skip
    return invitation, token


def invitation_check(*, invitation: Invitation | None, user: User | None) -> None:
    """Raise ValidationError, in words for people, if ``user`` may not accept the invitation.

    ``user`` None checks only the invitation itself (for a visitor not logged in yet).
    """
    if invitation is None:
        raise ValidationError("This invitation link is not valid. Check that you copied all of it.")
    status = invitation.status()
    if status == "accepted":
        raise ValidationError("This invitation has already been used.")
    if status == "revoked":
        raise ValidationError(
            "This invitation was withdrawn. Ask the workspace owner for a new one."
        )
    if status == "expired":
        raise ValidationError("This invitation has expired. Ask the workspace owner for a new one.")
    if user is not None and user.email.lower() != invitation.email.lower():
        raise ValidationError(
            f"This invitation is for {invitation.email}, but you are logged in as "
            f"{user.email}. Log in with the invited address to accept it."
        )


@transaction.atomic
def invitation_accept(*, token: str, user: User, actor: Actor = SYSTEM) -> Membership:
    """Join the invitation's workspace; ValidationError says why not, in words for people."""
    invitation = (
        Invitation.objects.select_for_update()
        .select_related("workspace")
        .filter(token_hash=Invitation.hash_token(token))
        .first()
    )
    invitation_check(invitation=invitation, user=user)
    assert invitation is not None  # invitation_check refuses a missing invitation
    # Someone who is already a member keeps their role: an invitation never demotes.
    membership, _ = Membership.objects.get_or_create(
        workspace=invitation.workspace, user=user, defaults={"role": invitation.role}
    )
    invitation.accepted_at = timezone.now()
    invitation.save(update_fields=["accepted_at"])
    logger.info("invitation accepted: id=%s workspace=%s", invitation.pk, invitation.workspace_id)
    audit_record(
        workspace=invitation.workspace, actor=actor, action="member.joined", target=user.email,
        details={"role": membership.role},
    )  # fmt: skip
    return membership


def invitation_revoke(*, invitation: Invitation, actor: Actor = SYSTEM) -> Invitation:
    if invitation.accepted_at is None and invitation.revoked_at is None:
        invitation.revoked_at = timezone.now()
        invitation.save(update_fields=["revoked_at"])
        logger.info(
            "invitation revoked: id=%s workspace=%s", invitation.pk, invitation.workspace_id
        )
        audit_record(
            workspace=invitation.workspace, actor=actor, action="member.invitation_revoked",
            target=invitation.email,
        )  # fmt: skip
    return invitation


def _refuse_losing_last_owner(membership: Membership) -> None:
    """Called inside a transaction; locks the owners so two demotions cannot race."""
    if membership.role != Membership.Role.OWNER:
        return
    owners = list(
        Membership.objects.select_for_update()
        .filter(workspace_id=membership.workspace_id, role=Membership.Role.OWNER)
        .values_list("pk", flat=True)
    )
    if owners == [membership.pk]:
        raise ValidationError(_LAST_OWNER)


@transaction.atomic
def membership_set_role(*, membership: Membership, role: str, actor: Actor = SYSTEM) -> Membership:
    if role not in Membership.Role.values:
        raise ValidationError(f"{role!r} is not a role")
    current = Membership.objects.select_for_update().get(
        pk=membership.pk, workspace_id=membership.workspace_id
    )
    if role != Membership.Role.OWNER:
        _refuse_losing_last_owner(current)
    previous = current.role
    current.role = role
    current.save(update_fields=["role"])
    membership.role = role
    logger.info("membership role set: id=%s workspace=%s", membership.pk, membership.workspace_id)
    if previous != role:
        audit_record(
            workspace=current.workspace, actor=actor, action="member.role_changed",
            target=current.user.email, details={"from": previous, "to": role},
        )  # fmt: skip
    return membership


@transaction.atomic
def membership_remove(
    *, membership: Membership, revoke_keys: bool = False, actor: Actor = SYSTEM
) -> list[ApiKey]:
    """Remove a member; ``revoke_keys``: also revoke the active keys they made (returned)."""
    current = Membership.objects.select_for_update().get(
        pk=membership.pk, workspace_id=membership.workspace_id
    )
    _refuse_losing_last_owner(current)
    current.delete()
    logger.info("membership removed: id=%s workspace=%s", membership.pk, membership.workspace_id)
    audit_record(
        workspace=current.workspace, actor=actor, action="member.removed",
        target=current.user.email, details={"role": current.role},
    )  # fmt: skip
    if not revoke_keys:
        return []
    keys = selectors.api_key_list_active_by(workspace=current.workspace, user=current.user)
    for key in keys:
        api_key_revoke(key=key, actor=actor)
    return keys
