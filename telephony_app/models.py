"""Carrier accounts and the phone numbers that answer with a saved agent."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from secrets_app.crypto import provider_associated_data, random_token
from secrets_app.models import ApiKey, Workspace
from sessions_app.models import Agent, AgentVersion


def _public_id() -> str:
    return random_token(24)


class CarrierAccount(models.Model):
    """A workspace's account at a carrier. The credential (Twilio's auth token, Telnyx's
    API key) is sealed like a secret, under its own label, and never shown again; Telnyx's
    public key (for webhook signatures) is public and kept as sent."""

    class Carrier(models.TextChoices):
        TWILIO = "twilio", "Twilio"
        TELNYX = "telnyx", "Telnyx"

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="carrier_accounts"
    )
    carrier = models.CharField(max_length=8, choices=Carrier.choices)
    name = models.CharField(max_length=64)
    # Twilio's Account SID (AC + 32 hex digits); blank for Telnyx.
    account_sid = models.CharField(max_length=34, blank=True)
    # Telnyx's Ed25519 public key, base64 (the portal's "Public key"); blank for Twilio.
    public_key = models.CharField(max_length=64, blank=True)
    # Telnyx's Call Control application id (the Dial API's ``connection_id``): needed only
    # to place calls; blank for Twilio.
    connection_id = models.CharField(max_length=64, blank=True)
    # The sealing's associated data names this, not the name: renaming needs no re-seal.
    uid = models.CharField(max_length=40, unique=True, default=_public_id, editable=False)
    ciphertext = models.BinaryField(editable=False)
    key_id = models.CharField(max_length=32, editable=False)
    credential_last4 = models.CharField(max_length=4, editable=False, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="carrier_name_per_workspace")
        ]

    def __str__(self) -> str:
        return f"{self.get_carrier_display()} {self.name}"

    def associated_data(self) -> bytes:
        return provider_associated_data(
            workspace_id=self.workspace_id, kind=f"carrier-{self.carrier}", name=self.uid
        )


class PhoneNumber(models.Model):
    """A number (E.164) at one of the workspace's carrier accounts, answered by an agent.

    ``uid`` is the number's part of its webhook URL: the carrier posts there, and only a
    request signed with the account's credential starts anything. ``line_key`` is the
    number's own publishable key (tokens only): the session a call opens belongs to it, so
    per-key limits count the line's calls and revoking the key ends them.
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="phone_numbers")
    account = models.ForeignKey(CarrierAccount, on_delete=models.PROTECT, related_name="numbers")
    number = models.CharField(max_length=16)
    # An agent that answers numbers is not deleted: they are moved or removed first (by
    # someone who may manage numbers); a deleted workspace takes both.
    agent = models.ForeignKey(Agent, on_delete=models.RESTRICT, related_name="phone_numbers")
    # Pinned: calls get this version of the agent, not its published one (docs/versions.md).
    agent_version = models.ForeignKey(
        AgentVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    label = models.CharField(max_length=100, blank=True)
    uid = models.CharField(max_length=40, unique=True, default=_public_id, editable=False)
    line_key = models.ForeignKey(ApiKey, on_delete=models.PROTECT, related_name="+", editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["number", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "number"], name="phone_number_per_workspace"
            )
        ]

    def __str__(self) -> str:
        return self.number


class PhoneCall(models.Model):
    """One call through a number: the carrier's ids, its ends and how long it lasted.
    The session record holds the conversation; this holds the telephone side."""

    class Direction(models.TextChoices):
        INBOUND = "inbound"
        OUTBOUND = "outbound"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="phone_calls")
    number = models.ForeignKey(
        PhoneNumber, null=True, on_delete=models.SET_NULL, related_name="calls"
    )
    direction = models.CharField(max_length=8, choices=Direction.choices)
    carrier = models.CharField(max_length=8, choices=CarrierAccount.Carrier.choices)
    call_sid = models.CharField(max_length=128)
    caller = models.CharField(max_length=32, blank=True)  # E.164 of the other end
    status = models.CharField(max_length=20, default="ringing")
    session_id = models.CharField(max_length=64, blank=True)  # the realtime session's id
    # The digest of the single-use token the stream must present (calls.stream_claim).
    stream_token_digest = models.CharField(max_length=64, blank=True, editable=False)
    started_at = models.DateTimeField(default=timezone.now)
    answered_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveBigIntegerField(default=0)
    # The carrier's status callbacks as they came: [{"status", "at"}] (outbound calls), and
    # what was done about an answering machine: [{"step": "voicemail" | "hung-up", "at"}].
    statuses = models.JSONField(default=list, blank=True)
    # Answering-machine detection (outbound): what the agent's setting said to do when a
    # machine answers (fixed when the call is placed), and what the carrier detected.
    machine_action = models.CharField(max_length=16, blank=True)
    voicemail_message = models.CharField(max_length=1000, blank=True)
    answered_by = models.CharField(max_length=24, blank=True)

    class Meta:
        ordering = ["-started_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["carrier", "call_sid"], name="phone_call_per_sid")
        ]

    def __str__(self) -> str:
        return f"{self.direction} call {self.call_sid[:12]}"


class MachineAction(models.TextChoices):
    """What an outbound call does when an answering machine picks up."""

    OFF = "off", "Do not detect answering machines"
    HANG_UP = "hang_up", "Hang up"
    LEAVE_MESSAGE = "leave_message", "Leave the voicemail message, then hang up"


class AgentCallSettings(models.Model):
    """An agent's settings for the calls it places (one row per agent, absent: defaults)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    agent = models.OneToOneField(Agent, on_delete=models.CASCADE, related_name="call_settings")
    machine_detection = models.CharField(
        max_length=16, choices=MachineAction.choices, default=MachineAction.OFF
    )
    voicemail_message = models.CharField(max_length=1000, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "agent call settings"

    def __str__(self) -> str:
        return f"call settings of agent {self.agent_id}"
