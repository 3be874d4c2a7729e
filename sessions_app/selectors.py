"""Reads for agents and session records, always scoped to a workspace."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from secrets_app.models import Workspace
from sessions_app.models import Agent, Session


def agent_list(*, workspace: Workspace) -> QuerySet[Agent]:
    return Agent.objects.filter(workspace=workspace)


def agent_get(*, workspace: Workspace, slug: str) -> Agent:
    return get_object_or_404(Agent, workspace=workspace, slug=slug)


def agent_find(*, workspace: Workspace, slug: str) -> Agent | None:
    return Agent.objects.filter(workspace=workspace, slug=slug).first()


def session_list(*, workspace: Workspace) -> QuerySet[Session]:
    return Session.objects.filter(workspace=workspace).select_related("agent")


def session_get(*, workspace: Workspace, public_id: str) -> Session:
    return get_object_or_404(
        Session.objects.select_related("agent").prefetch_related("transcript", "turns"),
        workspace=workspace,
        public_id=public_id,
    )
