"""Reads for agent tests and simulations, always scoped to a workspace."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from evals_app.models import AgentTest, Simulation, Status, TestRun
from secrets_app.models import Workspace
from sessions_app.models import Agent
from sessions_app.versions import draft_digest


def agent_tests(*, agent: Agent) -> QuerySet[AgentTest]:
    return AgentTest.objects.filter(workspace_id=agent.workspace_id, agent=agent)


def agent_test_get(*, agent: Agent, name: str) -> AgentTest:
    return get_object_or_404(AgentTest, workspace_id=agent.workspace_id, agent=agent, name=name)


def test_runs(*, agent: Agent) -> QuerySet[TestRun]:
    return TestRun.objects.filter(workspace_id=agent.workspace_id, agent=agent).select_related(
        "version"
    )


def test_run_get(*, workspace: Workspace, uid: uuid.UUID) -> TestRun:
    return get_object_or_404(
        TestRun.objects.select_related("agent", "version"), workspace=workspace, uid=uid
    )


def simulations(*, agent: Agent, batch: uuid.UUID | None = None) -> QuerySet[Simulation]:
    found = Simulation.objects.filter(workspace_id=agent.workspace_id, agent=agent)
    return found.filter(batch=batch) if batch else found


def publish_refusal(agent: Agent) -> str | None:
    """Why the agent's draft may not be published yet: its latest test run against this
    very draft must have passed."""
    digest = draft_digest(agent)
    run = (
        TestRun.objects.filter(
            workspace_id=agent.workspace_id, agent=agent, version__isnull=True, draft_digest=digest
        )
        .exclude(status__in=(Status.QUEUED, Status.RUNNING))
        .first()
    )
    if run is None:
        return "this agent requires passing tests: run them on the draft first"
    if run.status != Status.PASSED:
        return f"the draft's tests have not passed: run {run.uid} {run.status} ({run.message})"
    return None
