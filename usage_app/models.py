"""Daily usage aggregates, the quotas platform admins set, and the alerts they raised."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from secrets_app.models import Workspace
from sessions_app.models import Agent


class UsageFigures(models.Model):
    """The figures a session record keeps (``sessions_app.usage_figures.RECORD_FIELDS``)."""

    llm_requests = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    estimated_llm_requests = models.BigIntegerField(
        default=0, help_text="LLM requests whose provider reported no usage (tokens estimated)."
    )
    stt_audio_ms = models.BigIntegerField(default=0)
    tts_characters = models.BigIntegerField(default=0)
    tts_audio_ms = models.BigIntegerField(default=0)
    server_tool_calls = models.BigIntegerField(default=0)
    tool_cpu_ms = models.BigIntegerField(default=0)
    client_tool_calls = models.BigIntegerField(default=0)
    phone_call_ms = models.BigIntegerField(
        default=0, help_text="Time sessions spent on phone calls (from answer to hang-up)."
    )

    class Meta:
        abstract = True


class UsageDaily(UsageFigures):
    """One UTC day of one agent's sessions (or of inline-configured ones) in a workspace."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="usage_days")
    day = models.DateField()
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL)
    # The agent's id at the time (0: inline config): unique where a NULL would not be, and
    # kept when the agent is deleted.
    agent_key = models.BigIntegerField(default=0)
    agent_name = models.CharField(max_length=100, blank=True)
    sessions = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["day", "agent_key"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "day", "agent_key"], name="usage_day_per_agent"
            )
        ]
        indexes = [models.Index(fields=["workspace", "day"])]
        verbose_name_plural = "usage days"

    def __str__(self) -> str:
        return f"{self.workspace_id} {self.day} {self.agent_name or 'inline config'}"


class WorkspaceQuota(models.Model):
    """Limits per UTC day and calendar month; empty: no limit (the default)."""

    workspace = models.OneToOneField(Workspace, on_delete=models.CASCADE, related_name="quota")
    llm_tokens_per_day = models.PositiveBigIntegerField(null=True, blank=True)
    llm_tokens_per_month = models.PositiveBigIntegerField(null=True, blank=True)
    voice_minutes_per_day = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Minutes of microphone audio sent to speech recognition."
    )
    voice_minutes_per_month = models.PositiveBigIntegerField(null=True, blank=True)
    tool_calls_per_day = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Server and browser tool calls."
    )
    tool_calls_per_month = models.PositiveBigIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"quota of workspace {self.workspace_id}"


class QuotaAlert(models.Model):
    """A quota crossed 80 % (warning) or 100 % (exceeded) in a period: raised once each."""

    class Level(models.TextChoices):
        WARNING = "warning"
        EXCEEDED = "exceeded"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    metric = models.CharField(max_length=20)
    period = models.CharField(max_length=5)  # day | month
    period_start = models.DateField()
    level = models.CharField(max_length=8, choices=Level.choices)
    used = models.BigIntegerField()
    limit = models.BigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "metric", "period", "period_start", "level"],
                name="one_alert_per_quota_period_level",
            )
        ]

    def __str__(self) -> str:
        return f"{self.metric} per {self.period} {self.level}"
