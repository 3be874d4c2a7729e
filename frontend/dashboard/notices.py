"""Banners every workspace page shows: no language model yet; a quota nearly or fully used.

The quota banner is for owners (they are the ones told at 80 %); the language model one
for everyone, since any member may be the one trying an agent.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse

from secrets_app.models import ProviderCredential, Workspace
from sessions_app import workspace_providers
from usage_app import quotas


@dataclass(frozen=True)
class Notice:
    level: str  # warning | error
    text: str
    link: str
    link_text: str


def workspace_has_llm(workspace: Workspace) -> bool:
    if workspace_providers.platform_llm():
        return True
    return ProviderCredential.objects.filter(
        workspace=workspace, kind=ProviderCredential.Kind.LLM
    ).exists()


def workspace_notices(workspace: Workspace, *, is_owner: bool) -> list[Notice]:
    notices = []
    if not workspace_has_llm(workspace):
        notices.append(
            Notice(
                "warning",
                "No language model is connected, so agents can only repeat what they hear.",
                reverse("dashboard:providers", args=[workspace.pk]),
                "Connect one",
            )
        )
    if is_owner:
        usage_page = reverse("dashboard:usage", args=[workspace.pk])
        for state in quotas.quota_states(workspace_id=workspace.pk):
            if state.level == "exceeded":
                text = f"Quota used up: {state.words()}. New sessions are refused."
                notices.append(Notice("error", text, usage_page, "See usage"))
            elif state.level == "warning":
                text = f"Quota at {state.percent} %: {state.words()}."
                notices.append(Notice("warning", text, usage_page, "See usage"))
    return notices
