"""Reads for tenancy and credentials. Every query is scoped to a workspace."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from secrets_app.models import ApiKey, Membership, Secret, User, Workspace


def api_key_list(*, workspace: Workspace) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(workspace=workspace)


def api_key_get(*, workspace: Workspace, key_id: int) -> ApiKey:
    """The key, or Http404 — also for another workspace's key (no existence leak)."""
    return get_object_or_404(ApiKey, workspace=workspace, pk=key_id)


def secret_list(*, workspace: Workspace) -> QuerySet[Secret]:
    return Secret.objects.filter(workspace=workspace).defer("ciphertext")


def secret_get(*, workspace: Workspace, name: str) -> Secret:
    return get_object_or_404(Secret, workspace=workspace, name=name)


def workspace_list_for_user(*, user: User) -> QuerySet[Workspace]:
    return Workspace.objects.filter(memberships__user=user).order_by("name", "pk")


def membership_get(*, user: User, workspace: Workspace) -> Membership | None:
    return Membership.objects.filter(user=user, workspace=workspace).first()


def membership_find(*, user: User, workspace_id: int) -> Membership | None:
    """The user's membership of a workspace, if any (with the workspace loaded)."""
    return (
        Membership.objects.select_related("workspace")
        .filter(user=user, workspace_id=workspace_id)
        .first()
    )
