"""Members and invitations. Everyone sees the team; only owners change it.

An invitation link carries a token that is stored only as a hash: the owner sees the
link once (and the invitee gets it by email), then nobody can read it again.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.views.decorators.http import require_http_methods, require_POST

from frontend.dashboard.scope import (
    Scope,
    confirm_then,
    render_page,
    signed_in_user,
    workspace_page,
)
from secrets_app import mail, selectors, services, tasks
from secrets_app.audit import actor_for_request
from secrets_app.models import Invitation, Membership, User

SECTION = "dashboard:members"


class InviteForm(forms.Form):
    email = forms.EmailField(widget=forms.EmailInput(attrs={"autocomplete": "off"}))
    role = forms.ChoiceField(
        choices=Membership.Role.choices,
        initial=Membership.Role.MEMBER,
        help_text="Admins also manage API keys; owners also manage members.",
    )


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Membership.Role.choices)


@workspace_page
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    context = {
        "memberships": selectors.membership_list(workspace=scope.workspace),
        "invitations": selectors.invitation_list_pending(workspace=scope.workspace),
        "invite_form": InviteForm(),
        "roles": Membership.Role.choices,
    }
    return render_page(request, scope, "dashboard/members.html", context, section=SECTION)


def _send_invitation(request: HttpRequest, invitation: Invitation, link: str) -> None:
    """Queued, not sent here: the owner's page never waits for SMTP (and the owner can pass
    the link on by hand if the mail does not arrive)."""
    context = {"invitation": invitation, "link": link, "inviter": request.user}
    subject = render_to_string("dashboard/invitation_subject.txt", context).strip()
    body = render_to_string("dashboard/invitation_email.txt", context)
    mail.send_later(tasks.mail_send, subject=subject, body=body, to=invitation.email)


@workspace_page
@require_http_methods(["GET", "POST"])
def invite(request: HttpRequest, scope: Scope) -> HttpResponse:
    scope.require_owner()
    form = InviteForm(request.POST or None)
    if request.method != "POST":
        return render_page(
            request, scope, "dashboard/members_invite.html", {"form": form}, section=SECTION
        )
    if form.is_valid():
        try:
            invitation, token = services.invitation_create(
                actor=actor_for_request(request),
                workspace=scope.workspace,
                email=form.cleaned_data["email"],
                role=form.cleaned_data["role"],
                invited_by=signed_in_user(request),
            )
        except ValidationError as error:
            form.add_error(None, error)
        else:
            link = request.build_absolute_uri(reverse("dashboard:invitation", args=[token]))
            _send_invitation(request, invitation, link)
            context = {"invitation": invitation, "link": link}
            # The link is the invitation; like a secret key, it is shown in this response only.
            response = render_page(
                request, scope, "dashboard/members_invited.html", context, section=SECTION
            )
            response["Cache-Control"] = "no-store"
            return response
    return render_page(
        request, scope, "dashboard/members_invite.html", {"form": form}, section=SECTION
    )


@workspace_page
@require_POST
def set_role(request: HttpRequest, scope: Scope, membership_id: int) -> HttpResponse:
    scope.require_owner()
    membership = selectors.membership_get_by_id(
        workspace=scope.workspace, membership_id=membership_id
    )
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose owner, admin or member.")
    else:
        try:
            services.membership_set_role(
                actor=actor_for_request(request),
                membership=membership,
                role=form.cleaned_data["role"],
            )
        except ValidationError as error:
            messages.error(request, " ".join(error.messages))
        else:
            messages.success(request, f"{membership.user.email} is now {membership.role}.")
    return redirect("dashboard:members", scope.workspace.pk)


@workspace_page
@require_http_methods(["GET", "POST"])
def remove(request: HttpRequest, scope: Scope, membership_id: int) -> HttpResponse:
    scope.require_owner()
    membership = selectors.membership_get_by_id(
        workspace=scope.workspace, membership_id=membership_id
    )
    if request.method == "POST":
        try:
            revoked = services.membership_remove(
                actor=actor_for_request(request),
                membership=membership,
                revoke_keys=request.POST.get("revoke_keys") == "1",
            )
        except ValidationError as error:
            messages.error(request, " ".join(error.messages))
            return redirect("dashboard:members", scope.workspace.pk)
        if membership.user_id == request.user.pk:
            messages.success(request, f"You left {scope.workspace.name}.")
            return redirect("dashboard:home")
        also = f" and {len(revoked)} of their API keys revoked" if revoked else ""
        messages.success(request, f"{membership.user.email} was removed{also}.")
        return redirect("dashboard:members", scope.workspace.pk)
    context = {
        "membership": membership,
        "is_self": membership.user_id == request.user.pk,
        "keys": selectors.api_key_list_active_by(workspace=scope.workspace, user=membership.user),
    }
    return render_page(request, scope, "dashboard/members_remove.html", context, section=SECTION)


@workspace_page
@require_http_methods(["GET", "POST"])
def revoke_invitation(request: HttpRequest, scope: Scope, invitation_id: int) -> HttpResponse:
    scope.require_owner()
    invitation = selectors.invitation_get(workspace=scope.workspace, invitation_id=invitation_id)

    def act() -> str:
        services.invitation_revoke(actor=actor_for_request(request), invitation=invitation)
        return f"The invitation to {invitation.email} was revoked."

    context = {"invitation": invitation}
    return confirm_then(
        request, scope, "dashboard/invitation_revoke.html", context, section=SECTION, act=act
    )


# ---------------------------------------------------------------- the invitee's side


def _invitation_page(
    request: HttpRequest, invitation: Invitation | None, *, problem: str | None, status: int = 200
) -> HttpResponse:
    context: dict[str, Any] = {"invitation": invitation, "problem": problem, "here": request.path}
    if invitation is not None and request.user.is_authenticated:
        context["already_member"] = (
            selectors.membership_get(user=request.user, workspace=invitation.workspace) is not None
        )
    response = render(request, "dashboard/invitation.html", context, status=status)
    response["Cache-Control"] = "no-store"
    return response


def _problem(invitation: Invitation | None, user: User | None) -> str | None:
    try:
        services.invitation_check(invitation=invitation, user=user)
    except ValidationError as error:
        return " ".join(error.messages)
    return None


@require_http_methods(["GET", "POST"])
def accept(request: HttpRequest, token: str) -> HttpResponse:
    invitation = selectors.invitation_find(token=token)
    if invitation is None:
        return _invitation_page(request, None, problem=_problem(None, None), status=404)
    if not request.user.is_authenticated:
        if request.method == "POST":
            return redirect_to_login(request.path)
        return _invitation_page(request, invitation, problem=_problem(invitation, None))
    user: User = request.user
    if request.method == "POST":
        try:
            membership = services.invitation_accept(
                actor=actor_for_request(request), token=token, user=user
            )
        except ValidationError as error:
            return _invitation_page(request, invitation, problem=" ".join(error.messages))
        messages.success(request, f"Welcome to {membership.workspace.name}.")
        return redirect("dashboard:workspace", membership.workspace_id)
    return _invitation_page(request, invitation, problem=_problem(invitation, user))


urlpatterns = [
    path("members/", index, name="members"),
    path("members/invite/", invite, name="member-invite"),
    path("members/<id:membership_id>/role/", set_role, name="member-role"),
    path("members/<id:membership_id>/remove/", remove, name="member-remove"),
    path(
        "members/invitations/<id:invitation_id>/revoke/",
        revoke_invitation,
        name="invitation-revoke",
    ),
]

account_urlpatterns = [path("invitations/<str:token>/", accept, name="invitation")]
