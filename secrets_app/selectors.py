"""Reads for tenancy and credentials. Every query is scoped to a workspace."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone

from secrets_app.models import (
    ApiKey,
    AuditEvent,
    Invitation,
    Membership,
    Secret,
    User,
    Workspace,
)
from secrets_app.validators import SECRET_NAME


def api_key_list(*, workspace: Workspace) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(workspace=workspace).select_related("created_by", "created_by_key")


def api_key_list_active_by(*, workspace: Workspace, user: User) -> list[ApiKey]:
    """The keys ``user`` created that still work."""
    now = timezone.now()
    keys = ApiKey.objects.filter(workspace=workspace, created_by=user)
    return [key for key in keys if key.status(now) == "active"]


def audit_event_list(*, workspace: Workspace) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.filter(workspace=workspace)


def api_key_get(*, workspace: Workspace, key_id: int) -> ApiKey:
    """The key, or Http404 — also for another workspace's key (no existence leak)."""
    return get_object_or_404(ApiKey, workspace=workspace, pk=key_id)


def api_key_stops_at(*, workspace_id: int, key_id: int) -> datetime | None:
    """When a key stops (stopped) working: revoked, or its expiry; None if it does not."""
    key = ApiKey.objects.filter(workspace_id=workspace_id, pk=key_id).first()
    if key is None:
        return timezone.now()
    return key.revoked_at or key.expires_at


def secret_list(*, workspace: Workspace) -> QuerySet[Secret]:
    return Secret.objects.filter(workspace=workspace).defer("ciphertext")


def secret_get(*, workspace: Workspace, name: str) -> Secret:
    # A name no secret can have (NUL, which PostgreSQL refuses in a query, included) is
    # simply not found.
    if not SECRET_NAME.match(name):
        raise Http404("No such secret.")
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


def secret_find(*, workspace: Workspace, name: str) -> Secret | None:
    return Secret.objects.filter(workspace=workspace, name=name).defer("ciphertext").first()


def membership_list(*, workspace: Workspace) -> QuerySet[Membership]:
    return (
        Membership.objects.filter(workspace=workspace)
        .select_related("user")
        .order_by("created_at", "pk")
    )


def membership_get_by_id(*, workspace: Workspace, membership_id: int) -> Membership:
    """A membership of this workspace, or Http404 (also for another workspace's)."""
    return get_object_or_404(
        Membership.objects.select_related("user", "workspace"),
        workspace=workspace,
        pk=membership_id,
    )


def invitation_list_pending(*, workspace: Workspace) -> QuerySet[Invitation]:
    return Invitation.objects.filter(
        workspace=workspace,
        accepted_at__isnull=True,
        revoked_at__isnull=True,
        expires_at__gt=timezone.now(),
    )


def invitation_get(*, workspace: Workspace, invitation_id: int) -> Invitation:
    return get_object_or_404(Invitation, workspace=workspace, pk=invitation_id)


def invitation_find(*, token: str) -> Invitation | None:
    """The invitation a link's token opens, in any state. The token itself is the permission."""
    return (
        Invitation.objects.select_related("workspace", "invited_by")
        .filter(token_hash=Invitation.hash_token(token))
        .first()
    )
