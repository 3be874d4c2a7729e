"""Webhook endpoints of a workspace, the events delivered to them, and each attempt."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from secrets_app.crypto import webhook_associated_data
from secrets_app.models import Workspace


class EventType(models.TextChoices):
    SESSION_ENDED = "session.ended", "session.ended: a session ended (transcript, usage…)"
    TOOL_CALL_FAILED = "tool_call.failed", "tool_call.failed: a tool call failed or timed out"
    QUOTA_WARNING = "quota.warning", "quota.warning: a quota reached 80 %"
    QUOTA_EXCEEDED = "quota.exceeded", "quota.exceeded: a quota reached 100 %"
    ANALYSIS_COMPLETED = (
        "analysis.completed",
        "analysis.completed: a session's post-call analysis is ready",
    )


class WebhookEndpoint(models.Model):
    """A URL of the customer's that receives signed events. The signing secret is sealed
    (it is needed again to sign) and shown only once, when the endpoint is made."""

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="webhook_endpoints"
    )
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    url = models.CharField(max_length=500)
    description = models.CharField(max_length=200, blank=True)
    events = models.JSONField(default=list)
    enabled = models.BooleanField(default=True)
    ciphertext = models.BinaryField(editable=False)
    key_id = models.CharField(max_length=32, editable=False)
    secret_hint = models.CharField(max_length=12, editable=False)  # "whsec_…" prefix only
    created_at = models.DateTimeField(default=timezone.now)
    # Attempts that failed in a row (any delivery); no attempt goes out before
    # ``backoff_until``; past WEBHOOK_DISABLE_AFTER_FAILURES the platform disables it.
    consecutive_failures = models.PositiveIntegerField(default=0)
    backoff_until = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=400, blank=True)  # empty: by a person
    disabled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return self.url

    def associated_data(self) -> bytes:
        return webhook_associated_data(workspace_id=self.workspace_id, endpoint_uid=str(self.uid))


class WebhookDelivery(models.Model):
    """One event for one endpoint, retried with backoff until it succeeds or 24 h pass."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RETRYING = "retrying"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    event_id = models.UUIDField(default=uuid.uuid4, editable=False)
    event_type = models.CharField(max_length=40)
    payload = models.TextField()  # the JSON body, exactly as signed and sent
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    # A redelivery starts a new round of attempts with a fresh 24 h.
    round_started_at = models.DateTimeField(default=timezone.now)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_latency_ms = models.FloatField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.event_type} to {self.endpoint_id} ({self.status})"


class WebhookAttempt(models.Model):
    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log"
    )
    number = models.PositiveIntegerField()
    at = models.DateTimeField(default=timezone.now)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True)
    succeeded = models.BooleanField(default=False)

    class Meta:
        ordering = ["number", "pk"]

    def __str__(self) -> str:
        return f"attempt {self.number}"
