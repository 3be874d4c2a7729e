"""Invitations and membership changes: the service rules behind the members page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.http import Http404
from django.test import Client
from django.utils import timezone

from secrets_app import selectors, services
from secrets_app.models import Invitation, Membership, User
from tests.factories import Tenant


def _user(email: str) -> User:
    user, _ = services.user_get_or_create(email=email, password="pw-" + email)
    return user


def _invite(tenant: Tenant, email: str = "new@example.com", role: str = "member") -> str:
    _, token = services.invitation_create(
        workspace=tenant.workspace, email=email, role=role, invited_by=tenant.user
    )
    return token


def test_accepting_makes_a_membership_with_the_invited_role(owner: Tenant) -> None:
    token = _invite(owner, "New@Example.com", role="admin")
    membership = services.invitation_accept(token=token, user=_user("new@example.com"))
    assert membership.workspace == owner.workspace and membership.role == "admin"
    invitation = Invitation.objects.get(workspace=owner.workspace)
    assert invitation.status() == "accepted"


def test_only_the_token_hash_is_stored(owner: Tenant) -> None:
    invitation, token = services.invitation_create(
        workspace=owner.workspace, email="new@example.com", role="member", invited_by=owner.user
    )
    assert len(token) >= 32
    assert token not in repr(list(Invitation.objects.values()))
    assert len(invitation.token_hash) == 64 and invitation.token_hash != token
    assert invitation.expires_at - invitation.created_at == timedelta(days=7)


def test_the_email_must_match_case_insensitively(owner: Tenant) -> None:
    token = _invite(owner, "new@example.com")
    with pytest.raises(ValidationError, match=r"This invitation is for new@example\.com"):
        services.invitation_accept(token=token, user=_user("someone.else@example.com"))
    membership = services.invitation_accept(token=token, user=_user("NEW@example.com"))
    assert membership.user.email == "new@example.com"


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        ("used", "already been used"),
        ("revoked", "withdrawn"),
        ("expired", "expired"),
        ("unknown", "not valid"),
    ],
)
def test_spent_invitations_are_refused_with_a_reason(
    owner: Tenant, spoil: str, message: str
) -> None:
    token = _invite(owner)
    invitation = Invitation.objects.get(workspace=owner.workspace)
    user = _user("new@example.com")
    if spoil == "used":
        services.invitation_accept(token=token, user=user)
        Membership.objects.filter(user=user).delete()
    elif spoil == "revoked":
        services.invitation_revoke(invitation=invitation)
    elif spoil == "expired":
        Invitation.objects.filter(pk=invitation.pk).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
    else:
        token = token[:-1] + ("A" if token[-1] != "A" else "B")
    with pytest.raises(ValidationError, match=message):
        services.invitation_accept(token=token, user=user)
    assert not Membership.objects.filter(user=user).exists()


def test_inviting_again_replaces_the_pending_invitation(owner: Tenant) -> None:
    first = _invite(owner)
    second = _invite(owner, "NEW@example.com", role="admin")
    pending = list(selectors.invitation_list_pending(workspace=owner.workspace))
    assert [(i.email, i.role) for i in pending] == [("new@example.com", "admin")]
    user = _user("new@example.com")
    with pytest.raises(ValidationError, match="withdrawn"):
        services.invitation_accept(token=first, user=user)
    assert services.invitation_accept(token=second, user=user).role == "admin"


def test_a_member_cannot_be_invited_again(owner: Tenant, member: Tenant) -> None:
    with pytest.raises(ValidationError, match="already a member"):
        _invite(owner, "Member@example.com")


def test_an_existing_member_keeps_their_role(owner: Tenant, outsider: Tenant) -> None:
    token = _invite(owner, "outsider@example.com", role="member")
    services.membership_add(workspace=owner.workspace, user=outsider.user, role="admin")
    membership = services.invitation_accept(token=token, user=outsider.user)
    assert membership.role == "admin"


def test_the_last_owner_can_be_neither_demoted_nor_removed(owner: Tenant) -> None:
    membership = Membership.objects.get(workspace=owner.workspace, user=owner.user)
    with pytest.raises(ValidationError, match="needs an owner"):
        services.membership_set_role(membership=membership, role="admin")
    with pytest.raises(ValidationError, match="needs an owner"):
        services.membership_remove(membership=membership)
    membership.refresh_from_db()
    assert membership.role == "owner"


def test_an_owner_can_step_down_when_another_owner_exists(owner: Tenant, member: Tenant) -> None:
    other = Membership.objects.get(workspace=owner.workspace, user=member.user)
    services.membership_set_role(membership=other, role="owner")
    mine = Membership.objects.get(workspace=owner.workspace, user=owner.user)
    services.membership_set_role(membership=mine, role="member")
    assert Membership.objects.get(pk=mine.pk).role == "member"
    with pytest.raises(ValidationError, match="needs an owner"):
        services.membership_remove(membership=other)
    services.membership_remove(membership=mine)
    assert not Membership.objects.filter(pk=mine.pk).exists()


def test_roles_are_checked(owner: Tenant) -> None:
    membership = Membership.objects.get(workspace=owner.workspace, user=owner.user)
    with pytest.raises(ValidationError):
        services.membership_set_role(membership=membership, role="emperor")
    with pytest.raises(ValidationError):
        _invite(owner, role="emperor")


def test_the_outsider_sees_nothing(owner: Tenant, outsider: Tenant) -> None:
    _invite(owner)
    invitation = Invitation.objects.get(workspace=owner.workspace)
    assert not selectors.invitation_list_pending(workspace=outsider.workspace).exists()
    assert [m.user for m in selectors.membership_list(workspace=outsider.workspace)] == [
        outsider.user
    ]
    with pytest.raises(Http404):
        selectors.invitation_get(workspace=outsider.workspace, invitation_id=invitation.pk)
    owner_membership = Membership.objects.get(workspace=owner.workspace, user=owner.user)
    with pytest.raises(Http404):
        selectors.membership_get_by_id(
            workspace=outsider.workspace, membership_id=owner_membership.pk
        )


def test_the_admin_lists_invitations_without_the_token(client: Client, owner: Tenant) -> None:
    token = _invite(owner)
    staff = User.objects.create_superuser(email="staff@example.com", password="pw-staff-123")
    client.force_login(staff)
    invitation = Invitation.objects.get(workspace=owner.workspace)
    for url in (
        "/admin/secrets_app/invitation/",
        f"/admin/secrets_app/invitation/{invitation.pk}/change/",
    ):
        response = client.get(url)
        assert response.status_code == 200
        assert "new@example.com" in response.content.decode()
        assert token not in response.content.decode()
    assert client.get("/admin/secrets_app/invitation/add/").status_code == 403
