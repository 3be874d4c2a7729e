"""Tenancy and credentials: users, workspaces, memberships, API keys, secrets."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from django.contrib.auth.models import AbstractUser, BaseUserManager
from django.db import models
from django.utils import timezone

from engine.providers import registry
from secrets_app.crypto import (
    provider_associated_data,
    secret_associated_data,
    token_digest,
)
from secrets_app.validators import validate_secret_name


class UserManager(BaseUserManager["User"]):
    use_in_migrations = True

    def get_by_natural_key(self, username: str | None) -> User:
        return self.get(email__iexact=username)

    def _create(self, email: str, password: str | None, **extra: Any) -> User:
        if not email:
            raise ValueError("an email address is required")
        user = self.model(email=self.normalize_email(email).lower(), **extra)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_user(self, email: str, password: str | None = None, **extra: Any) -> User:
        extra.setdefault("is_staff", False)
        extra.setdefault("is_superuser", False)
        return self._create(email, password, **extra)

    def create_superuser(self, email: str, password: str | None = None, **extra: Any) -> User:
        extra.update(is_staff=True, is_superuser=True)
        extra.setdefault("email_verified_at", timezone.now())  # made by an operator
        return self._create(email, password, **extra)


class User(AbstractUser):
    """A person. Logs in by email; belongs to workspaces through memberships."""

    username = None  # type: ignore[assignment]  # no username column: email is the login
    email = models.EmailField("email address", unique=True)
    # Set when the person opened the link mailed at sign-up; until then no API keys.
    email_verified_at = models.DateTimeField(null=True, blank=True)

    USERNAME_FIELD = "email"
    REQUIRED_FIELDS: ClassVar[list[str]] = []

    # Keyed by email: not the stubs' username-keyed ``UserManager[User]``.
    objects: ClassVar[UserManager] = UserManager()  # type: ignore[assignment]

    def __str__(self) -> str:
        return self.email


class Workspace(models.Model):
    """The tenant. Everything a customer owns hangs off a workspace."""

    name = models.CharField(max_length=100)
    session_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Concurrent sessions; empty = platform default."
    )
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        ADMIN = "admin"
        MEMBER = "member"

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="memberships")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "workspace"], name="one_membership_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"


class ApiKey(models.Model):
    """A pk_ (browser, public) or sk_ (server, secret) key.

    Only a keyed hash identifies a key. A secret key's plaintext is shown once at
    creation; a publishable key is public by design and kept for display.
    """

    class Kind(models.TextChoices):
        PUBLISHABLE = "publishable"
        SECRET = "secret"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="api_keys")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    label = models.CharField(max_length=100, blank=True)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=12, editable=False)
    last4 = models.CharField(max_length=4, editable=False)
    publishable_key = models.CharField(max_length=64, blank=True, editable=False)
    allowed_origins = models.JSONField(default=list, blank=True)
    allowed_agents = models.JSONField(default=list, blank=True)
    # Publishable keys: what a page may send in `configure` besides naming a saved agent.
    allow_inline_config = models.BooleanField(default=False)
    allow_inline_tool_code = models.BooleanField(default=False)
    # Publishable keys: only session tokens (minted with an sk_ key) open sessions.
    tokens_only = models.BooleanField(default=False)
    # Secret keys: what the key may do on the REST API (secrets_app.scopes).
    scopes = models.JSONField(default=list, blank=True)
    rolled_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="rolled_to"
    )
    created_by = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="api_keys_created"
    )
    created_by_key = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="created_keys"
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.display} ({self.label or self.kind})"

    @property
    def display(self) -> str:
        return f"{self.prefix}…{self.last4}"

    def status(self, now: datetime | None = None) -> str:
        now = now or timezone.now()
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"

    @property
    def current_status(self) -> str:
        return self.status()


class Secret(models.Model):
    """A customer credential, encrypted at rest and bound to the hosts it may reach."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="secrets")
    name = models.CharField(max_length=64, validators=[validate_secret_name])
    ciphertext = models.BinaryField(editable=False)
    key_id = models.CharField(max_length=32, editable=False)
    allowed_hosts = models.JSONField(default=list, blank=True)
    readable_by_code = models.BooleanField(
        default=False,
        help_text="Handlers saved by an owner or admin see the value itself (they are "
        "trusted not to leak it); otherwise code only ever holds a reference.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="secret_name_per_workspace")
        ]

    def __str__(self) -> str:
        return self.name

    def associated_data(self) -> bytes:
        return secret_associated_data(workspace_id=self.workspace_id, name=self.name)


def credential_kinds() -> list[tuple[str, str]]:
    """An LLM connection, an embedding connection (knowledge bases), then each speech
    provider whose folder declares a credential kind (``ProviderSpec.credential`` under
    ``engine/providers/``): a new one needs no edit here, and no migration while its name
    fits ``kind``'s 12 characters."""
    speech = [(spec.name, spec.credential_label) for spec in registry.credential_specs()]
    return [(kind.value, kind.label) for kind in ProviderCredential.Kind] + speech


class ProviderCredential(models.Model):
    """A workspace's own account at a provider: an LLM or embedding endpoint, or a speech
    provider's key.

    A different kind of secret than ``Secret``: the platform's adapters use it, tool code
    never sees it (it is not a ``Secret`` row, and it is sealed under another label). The
    key is write-only; ``ciphertext`` is empty for an endpoint that needs none (Ollama).
    """

    class Kind(models.TextChoices):
        """The kinds that are not a speech provider's: the others are the names of the
        providers whose folders declare a credential kind (``credential_kinds``)."""

        LLM = "llm", "LLM (OpenAI-compatible)"
        # A knowledge base's embeddings (``knowledge_app.embedders``), named like LLM ones.
        EMBEDDING = "embedding", "Embeddings (OpenAI-compatible)"

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="provider_credentials"
    )
    kind = models.CharField(max_length=12, choices=credential_kinds)
    # LLM and embedding connections are named by the owner (agents and knowledge bases
    # choose by name); speech providers are one per kind and named after it.
    name = models.CharField(max_length=64)
    base_url = models.CharField(max_length=500, blank=True)
    model = models.CharField(max_length=100, blank=True)
    ciphertext = models.BinaryField(editable=False, blank=True, default=b"")
    key_id = models.CharField(max_length=32, editable=False, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    checked_at = models.DateTimeField(null=True, blank=True)
    check_ok = models.BooleanField(null=True, blank=True)
    check_message = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["kind", "created_at", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "kind", "name"], name="provider_name_per_workspace"
            )
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.name}"

    @property
    def has_key(self) -> bool:
        return bool(self.key_id)

    def associated_data(self) -> bytes:
        return provider_associated_data(
            workspace_id=self.workspace_id, kind=self.kind, name=self.name
        )


class Invitation(models.Model):
    """An invitation to join a workspace, sent by email as a link that carries a token.

    Only the token's SHA-256 is stored; the link is the capability, shown once.
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    role = models.CharField(
        max_length=10, choices=Membership.Role.choices, default=Membership.Role.MEMBER
    )
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    invited_by = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.email} to {self.workspace} ({self.role})"

    @staticmethod
    def hash_token(token: str) -> str:
        return token_digest(token)

    def status(self, now: datetime | None = None) -> str:
        now = now or timezone.now()
        if self.accepted_at is not None:
            return "accepted"
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at <= now:
            return "expired"
        return "pending"


class AuditEvent(models.Model):
    """A security-relevant change: who (a person, a key or the system), what, when, from where.

    ``details`` never holds a secret value, a key's plaintext or a handler's source.
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="audit_events")
    actor_user = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_key = models.ForeignKey(
        ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(max_length=255)  # kept when the user or key is gone
    action = models.CharField(max_length=64)
    target = models.CharField(max_length=255, blank=True)
    details = models.JSONField(default=dict, blank=True)
    address = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["workspace", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_label}"
