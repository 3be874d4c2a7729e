"""Saved agent configurations and the records of past sessions."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from secrets_app.models import ApiKey, Workspace


class Agent(models.Model):
    """An agent saved by the workspace: the base that a browser's configure builds on.

    ``tools`` is a list of {name, description, parameters, handler | client, timeoutMs,
    handler_sha256}. A handler saved here is pinned: its hash proves the owner saved it,
    which is what unlocks real secret values in the sandbox.
    """

    class Mode(models.TextChoices):
        VOICE = "voice"
        TEXT = "text"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=64)
    instructions = models.TextField(blank=True)
    greeting = models.CharField(max_length=1024, blank=True)
    voice = models.CharField(max_length=64, blank=True)
    mode = models.CharField(max_length=5, choices=Mode.choices, default=Mode.VOICE)
    llm_model = models.CharField(max_length=100, blank=True)
    # One of the workspace's LLM connections, by name; blank: the workspace's default.
    llm_provider = models.CharField(max_length=64, blank=True)
    stt_provider = models.CharField(max_length=32, blank=True)
    tts_provider = models.CharField(max_length=32, blank=True)
    # Tried in order when the agent's own provider fails (README "Retries and fallbacks"):
    # [{"connection": name or "" (the default), "model": name or "" (the connection's)}]
    # and TTS provider names.
    llm_fallbacks = models.JSONField(default=list, blank=True)
    tts_fallbacks = models.JSONField(default=list, blank=True)
    tools = models.JSONField(default=list, blank=True)
    # Words users are expected to say (product names, code identifiers): recognition hints.
    vocabulary = models.JSONField(default=list, blank=True)
    # Said when the LLM's reply is empty; blank: the platform's sentence.
    empty_reply = models.CharField(max_length=256, blank=True)
    # Empty: the platform's SESSION_IDLE_TIMEOUT_S / SESSION_MAX_DURATION_S.
    idle_timeout_s = models.PositiveIntegerField(null=True, blank=True)
    max_session_s = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "slug"], name="agent_slug_per_workspace")
        ]

    def __str__(self) -> str:
        return self.name


class Session(models.Model):
    """One realtime connection's record (not its live state)."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="sessions")
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL)
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL)
    origin = models.CharField(max_length=255, blank=True)
    end_user = models.CharField(max_length=200, blank=True)  # from the session token, if any
    mode = models.CharField(max_length=5, choices=Agent.Mode.choices, default=Agent.Mode.VOICE)
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    close_code = models.PositiveIntegerField(null=True, blank=True)
    turn_count = models.PositiveIntegerField(default=0)
    tool_call_count = models.PositiveIntegerField(default=0)
    # What the session consumed so far ({figure: total}, usage.USAGE_FIELDS).
    usage = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-started_at", "-pk"]
        indexes = [models.Index(fields=["workspace", "ended_at"])]

    def __str__(self) -> str:
        return str(self.public_id)


class TranscriptEntry(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="transcript")
    role = models.CharField(max_length=10, choices=Role.choices)
    text = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.role} at {self.created_at:%H:%M:%S}"


class TurnRecord(models.Model):
    """One turn's latency figures, as the session's ``metrics`` event gave them."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turns")
    turn_id = models.PositiveIntegerField()
    metrics = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["turn_id", "pk"]

    def __str__(self) -> str:
        return f"turn {self.turn_id}"


class ToolCallRecord(models.Model):
    """One tool call of a session, once it settled; texts scrubbed of the workspace's secrets."""

    class Status(models.TextChoices):
        COMPLETED = "completed"
        FAILED = "failed"
        TIMED_OUT = "timed_out", "timed out"
        CANCELLED = "cancelled"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="tool_calls")
    call_id = models.CharField(max_length=100)
    name = models.CharField(max_length=100)
    arguments = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=12, choices=Status.choices)
    result = models.TextField(blank=True)
    error = models.TextField(blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"


class SessionToken(models.Model):
    """A single-use, short-lived ticket for one session of one agent, minted with an sk_ key.

    Only the token's digest is stored. ``variables`` are fixed for the session: the page
    cannot change them; ``end_user`` is the customer's label for the person, kept on the
    session record.
    """

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="session_tokens"
    )
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_by_key = models.ForeignKey(
        ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    variables = models.JSONField(default=dict, blank=True)
    end_user = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"token for {self.agent_id} until {self.expires_at:%H:%M:%S}"
