"""The workspace a dashboard page is about, and who is looking at it.

The workspace comes from the URL (so two tabs can show two workspaces); membership
is checked on every request and a stranger gets the same 404 as a missing workspace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from frontend.dashboard.notices import workspace_notices
from secrets_app import selectors
from secrets_app.models import Membership, User, Workspace

LAST_WORKSPACE = "dashboard_workspace_id"

# (label, URL name) of the sidebar, in order.
NAV = (
    ("Agents", "dashboard:agents"),
    ("Playground", "dashboard:playground"),
    ("Sessions", "dashboard:sessions"),
    ("Knowledge", "dashboard:knowledge"),
    ("MCP servers", "dashboard:mcp"),
    ("Usage", "dashboard:usage"),
    ("Secrets", "dashboard:secrets"),
    ("Providers", "dashboard:providers"),
    ("Webhooks", "dashboard:webhooks"),
    ("Phone", "dashboard:phone"),
    ("API keys", "dashboard:keys"),
    ("Members", "dashboard:members"),
)
OWNER_NAV = (*NAV, ("Retention", "dashboard:retention"), ("Audit log", "dashboard:audit"))


@dataclass(frozen=True)
class Scope:
    workspace: Workspace
    membership: Membership

    @property
    def role(self) -> str:
        return self.membership.role

    @property
    def is_owner(self) -> bool:
        return self.role == Membership.Role.OWNER

    @property
    def can_manage_keys(self) -> bool:
        return self.role in (Membership.Role.OWNER, Membership.Role.ADMIN)

    @property
    def can_read_secrets(self) -> bool:
        """Owners and admins: their saved handlers may see readable secret values, and
        they alone choose where a secret may be sent."""
        return self.can_manage_keys

    def require_secret_manager(self) -> None:
        if not self.can_read_secrets:
            raise PermissionDenied(
                "Only owners and admins can choose where a secret may be sent or let code read it."
            )

    def require_key_manager(self) -> None:
        if not self.can_manage_keys:
            raise PermissionDenied("Only owners and admins can manage API keys.")

    def require_owner(self, what: str = "manage members") -> None:
        if not self.is_owner:
            raise PermissionDenied(f"Only owners can {what}.")


WorkspaceView = Callable[..., HttpResponse]


def signed_in_user(request: HttpRequest) -> User:
    """The user of a page behind ``login_required`` (the stubs also allow AnonymousUser)."""
    user = request.user
    assert user.is_authenticated, "login_required lets only signed-in users through"
    return user


def workspace_page(view: WorkspaceView) -> Callable[..., HttpResponse]:
    """Wrap ``view(request, scope, **kwargs)`` so it only runs for members of the workspace."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, workspace_id: int, **kwargs: Any) -> HttpResponse:
        membership = selectors.membership_find(
            user=signed_in_user(request), workspace_id=workspace_id
        )
        if membership is None:
            raise Http404("No such workspace.")
        request.session[LAST_WORKSPACE] = workspace_id
        return view(request, Scope(membership.workspace, membership), **kwargs)

    return wrapper


def render_page(
    request: HttpRequest,
    scope: Scope,
    template: str,
    context: dict[str, Any] | None = None,
    *,
    section: str,
    status: int = 200,
) -> HttpResponse:
    """Render a workspace page with the layout's context (switcher, sidebar, role)."""
    page = {
        "scope": scope,
        "workspaces": selectors.workspace_list_for_user(user=signed_in_user(request)),
        "nav": OWNER_NAV if scope.is_owner else NAV,
        "section": section,
        "notices": workspace_notices(scope.workspace, is_owner=scope.is_owner),
        **(context or {}),
    }
    return render(request, template, page, status=status)


class ActionRefused(Exception):
    """A confirmed action that did not happen; its text says why and what to do."""


def confirm_then(
    request: HttpRequest,
    scope: Scope,
    template: str,
    context: dict[str, Any],
    *,
    section: str,
    act: Callable[[], str],
) -> HttpResponse:
    """A destructive action: GET shows the confirmation page; POST runs ``act``, shows the
    sentence it returns (or why it refused: ``ActionRefused``) and goes back to the
    section's list."""
    if request.method == "POST":
        try:
            messages.success(request, act())
        except ActionRefused as refused:
            messages.error(request, str(refused))
        return redirect(section, scope.workspace.pk)
    return render_page(request, scope, template, context, section=section)
