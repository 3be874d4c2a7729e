"""Agent tests, their runs, and simulated conversations (docs/testing-agents.md)."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from secrets_app.models import Workspace
from sessions_app.models import Agent, AgentVersion


class Status(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"  # could not run (no LLM, a provider failed): says why in ``message``


class AgentTest(models.Model):
    """A scripted conversation with expectations per turn.

    ``turns``: [{user, spoken?, tool_called?, tool_arguments? {name: regex},
    tool_not_called?, reply_contains?, reply_matches?, judge?}] (``spoken``: the line is said
    by the offline voice and heard by the offline recogniser); ``tool_results``: {tool name:
    result} given to the agent in place of running the tool."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tests")
    name = models.CharField(max_length=100)
    turns = models.JSONField(default=list)
    tool_results = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "name"], name="agent_test_name_per_agent")
        ]

    def __str__(self) -> str:
        return self.name


class TestRun(models.Model):
    """One run of an agent's tests against its draft (``version`` null) or a version."""

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="test_runs")
    version = models.ForeignKey(AgentVersion, null=True, blank=True, on_delete=models.SET_NULL)
    draft_digest = models.CharField(max_length=64, blank=True)  # the draft it ran against
    spoken = models.BooleanField(default=False)  # every user turn spoken, not only the marked
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    message = models.CharField(max_length=500, blank=True)
    # [{test, passed, turns: [{user, spoken, heard?, reply, tools, checks: [{check, passed,
    # detail}]}]}]
    results = models.JSONField(default=list, blank=True)
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    __test__ = False  # not a pytest class

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"run {self.uid} ({self.status})"


class Simulation(models.Model):
    """An LLM playing a user (``persona``, ``goal``) against the agent for up to
    ``max_turns``, judged against ``criteria``; runs started together share a ``batch``."""

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    batch = models.UUIDField(default=uuid.uuid4, db_index=True)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="simulations")
    version = models.ForeignKey(AgentVersion, null=True, blank=True, on_delete=models.SET_NULL)
    persona = models.CharField(max_length=1000)
    goal = models.CharField(max_length=1000)
    criteria = models.JSONField(default=list)  # texts, each judged pass/fail with a reason
    max_turns = models.PositiveSmallIntegerField(default=6)
    # voice: the user's lines are spoken and heard, the agent's replies synthesized
    mode = models.CharField(max_length=5, choices=[("text", "text"), ("voice", "voice")],
                            default="text")  # fmt: skip
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    message = models.CharField(max_length=500, blank=True)
    transcript = models.JSONField(default=list, blank=True)  # [{role, text, heard?, audio_ms?}]
    verdicts = models.JSONField(default=list, blank=True)  # [{criterion, passed, reason}]
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"simulation {self.uid} ({self.status})"
