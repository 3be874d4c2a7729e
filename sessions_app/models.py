"""Saved agent configurations and the records of past sessions."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from engine.protocol import ToolStatus
from secrets_app.crypto import recording_associated_data
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
    # Tried in order when the agent's own provider fails (docs/providers.md, "Retries and
    # fallbacks"):
    # [{"connection": name or "" (the default), "model": name or "" (the connection's)}]
    # and TTS provider names.
    llm_fallbacks = models.JSONField(default=list, blank=True)
    tts_fallbacks = models.JSONField(default=list, blank=True)
    tools = models.JSONField(default=list, blank=True)
    # Knowledge bases the agent answers from (docs/knowledge.md), and how: a tool the LLM
    # calls, or a search with the user's words before each turn's first LLM request.
    knowledge_bases = models.ManyToManyField(
        "knowledge_app.KnowledgeBase", blank=True, related_name="agents"
    )
    knowledge_mode = models.CharField(
        max_length=8,
        choices=[("tool", "search tool"), ("prefetch", "search before answering")],
        default="tool",
    )
    # While a tool works (docs/mcp.md, "Timeouts and speaking while a tool works"): what the
    # agent says once its tools have run this long (null: 1500 ms; 0: never; blank: the
    # platform's sentence), and how long a knowledge search may take (null: 10 s).
    tool_filler = models.CharField(max_length=200, blank=True)
    tool_filler_after_ms = models.PositiveIntegerField(null=True, blank=True)
    knowledge_timeout_ms = models.PositiveIntegerField(null=True, blank=True)
    # The language it hears and speaks (engine.providers.languages): an ISO 639-1 code,
    # "detect" (the caller's), or blank (English).
    language = models.CharField(max_length=8, blank=True)
    # Words users are expected to say (product names, code identifiers): recognition hints.
    vocabulary = models.JSONField(default=list, blank=True)
    # Said when the LLM's reply is empty; blank: the platform's sentence.
    empty_reply = models.CharField(max_length=256, blank=True)
    # Empty: the platform's SESSION_IDLE_TIMEOUT_S / SESSION_MAX_DURATION_S.
    idle_timeout_s = models.PositiveIntegerField(null=True, blank=True)
    max_session_s = models.PositiveIntegerField(null=True, blank=True)
    # Nothing said in its sessions is stored (docs/privacy.md): only metadata and usage.
    zero_retention = models.BooleanField(default=False)
    # Record both sides of its sessions' audio (docs/privacy.md, "Recordings"); never under
    # zero retention.
    record_audio = models.BooleanField(default=False)
    # Preemptive generation (docs/speech.md): the reply starts, held back, when the user has
    # probably finished, and goes out at once if they have; it spends LLM tokens on pauses
    # that were not the end (counted in usage).
    preemptive_generation = models.BooleanField(default=True)
    # Post-call analysis (docs/analysis.md): {"summary": bool, "criteria": [{name,
    # description}], "fields": [{name, type, description}]}; empty: none.
    analysis = models.JSONField(default=dict, blank=True)
    # Versions (docs/versions.md). The fields above are the draft; sessions get the published
    # version (or, for ``split_percent`` of sessions, ``split_version``). ``drafts`` off: every
    # save publishes at once (how agents behaved before versions); on: only Publish does.
    drafts = models.BooleanField(default=False)
    require_tests = models.BooleanField(default=False)  # publish only a draft whose tests pass
    published_version = models.ForeignKey(
        "AgentVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    split_version = models.ForeignKey(
        "AgentVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    split_percent = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "slug"], name="agent_slug_per_workspace")
        ]

    def __str__(self) -> str:
        return self.name


class AgentVersion(models.Model):
    """An immutable, numbered snapshot of everything that defines an agent (``config``:
    instructions, greeting, voice, providers, tools with their pinned handlers, knowledge
    attachments), made by publishing its draft."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    config = models.JSONField(default=dict)
    digest = models.CharField(max_length=64)  # SHA-256 of ``config``: equal drafts, equal digests
    note = models.CharField(max_length=200, blank=True)
    created_by = models.CharField(max_length=200, blank=True)  # the actor's label
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "number"], name="agent_version_number")
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} v{self.number}"


class AgentVersionPin(models.Model):
    """A key that reaches a fixed version of an agent instead of the published one."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="pins")
    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+")
    version = models.ForeignKey(AgentVersion, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "api_key"], name="agent_pin_per_key")
        ]

    def __str__(self) -> str:
        return f"{self.api_key_id} -> {self.version_id}"


class Session(models.Model):
    """One realtime connection's record (not its live state)."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="sessions")
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL)
    agent_version = models.ForeignKey(
        AgentVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )  # the version that served it
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL)
    origin = models.CharField(max_length=255, blank=True)
    end_user = models.CharField(max_length=200, blank=True)  # from the session token, if any
    mode = models.CharField(max_length=5, choices=Agent.Mode.choices, default=Agent.Mode.VOICE)
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    close_code = models.PositiveIntegerField(null=True, blank=True)
    turn_count = models.PositiveIntegerField(default=0)
    tool_call_count = models.PositiveIntegerField(default=0)
    # What the session consumed so far ({figure: total}, usage_figures.RECORD_FIELDS).
    usage = models.JSONField(default=dict, blank=True)
    # Fixed when the session starts, from its agent's and workspace's privacy settings:
    # nothing said is stored; stored transcripts have numbers and addresses redacted.
    zero_retention = models.BooleanField(default=False)
    redacted = models.BooleanField(default=False)

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

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="tool_calls")
    call_id = models.CharField(max_length=100)
    name = models.CharField(max_length=100)
    arguments = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=12, choices=[(status.value, status.label) for status in ToolStatus.finals()]
    )
    result = models.TextField(blank=True)
    error = models.TextField(blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"


class SessionError(models.Model):
    """A provider's failure in a session, in detail: what the page only hears as a code and
    a fixed sentence. Scrubbed of every credential the session used before it is kept."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="errors")
    code = models.CharField(max_length=40)
    detail = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.code} at {self.created_at:%H:%M:%S}"


class SessionAnalysis(models.Model):
    """What the LLM made of a finished session, by its agent's ``analysis`` settings."""

    class Status(models.TextChoices):
        PENDING = "pending"
        COMPLETED = "completed"
        FAILED = "failed"
        SKIPPED = "skipped"  # nothing to analyse (no transcript kept, no LLM)

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="analysis")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    summary = models.TextField(blank=True)
    # [{name, result: success|failure|unknown, reason}]
    criteria = models.JSONField(default=list, blank=True)
    data = models.JSONField(default=dict, blank=True)  # the extracted fields, by name
    error = models.CharField(max_length=300, blank=True)  # a fixed sentence, never provider text
    usage = models.JSONField(default=dict, blank=True)
    requested_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)
    reruns = models.PositiveIntegerField(default=0)  # asked again (ANALYSIS_MAX_RERUNS)

    class Meta:
        indexes = [models.Index(fields=["workspace", "completed_at"])]

    def __str__(self) -> str:
        return f"analysis of {self.session_id} ({self.status})"


class Recording(models.Model):
    """A session's audio, both sides (docs/privacy.md, "Recordings"): a stereo WAV sealed
    with a data key of its own (``ciphertext``: the key, sealed by the secret-store keyring)
    and kept in the ``recordings`` storage under ``storage_name``. Deleting the row deletes
    the object (``sessions_app.recordings``)."""

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="recording")
    storage_name = models.CharField(max_length=255)
    # The data key (base64), sealed like a secret (``secrets_app.services.sealed_store``;
    # ``rotate_secrets_key`` re-seals it under the newest keyring key).
    key_id = models.CharField(max_length=32)
    ciphertext = models.BinaryField()
    size_bytes = models.PositiveBigIntegerField()  # of the WAV, once opened
    duration_ms = models.PositiveIntegerField()
    started_at = models.DateTimeField()  # the recording's time 0, for the transcript
    truncated = models.BooleanField(default=False)  # it reached RECORDING_MAX_SECONDS
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["workspace", "created_at"])]

    def __str__(self) -> str:
        return f"recording of {self.session_id}"

    def associated_data(self) -> bytes:
        return recording_associated_data(workspace_id=self.workspace_id, recording_uid=self.uid.hex)


class RetentionPolicy(models.Model):
    """How long a workspace keeps what its sessions said (docs/privacy.md). ``None`` days:
    kept until deleted. Metadata and usage are kept whatever these say."""

    workspace = models.OneToOneField(Workspace, on_delete=models.CASCADE, related_name="retention")
    transcripts_days = models.PositiveIntegerField(null=True, blank=True)
    tool_logs_days = models.PositiveIntegerField(null=True, blank=True)
    analysis_days = models.PositiveIntegerField(null=True, blank=True)
    recordings_days = models.PositiveIntegerField(null=True, blank=True)
    zero_retention = models.BooleanField(default=False)
    redact_transcripts = models.BooleanField(default=False)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"retention of {self.workspace_id}"


class SessionToken(models.Model):
    """A single-use, short-lived ticket for one session of one agent, minted with an sk_ key.

    Only the token's digest is stored. ``variables`` are fixed for the session: the page
    sets no variable but those ``page_variables`` names; ``origin``, when set, is the only
    page origin it connects from; ``end_user`` is the customer's label for the person, kept
    on the session record.
    """

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="session_tokens"
    )
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    # Pinned: the session gets this version, not the published one.
    agent_version = models.ForeignKey(
        AgentVersion, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_by_key = models.ForeignKey(
        ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    variables = models.JSONField(default=dict, blank=True)
    page_variables = models.JSONField(default=list, blank=True)  # names the page may set
    end_user = models.CharField(max_length=200, blank=True)
    # The page origin the token may connect from ("": any).
    origin = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"token for {self.agent_id} until {self.expires_at:%H:%M:%S}"
