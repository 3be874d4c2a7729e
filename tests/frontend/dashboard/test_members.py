"""The members page and invitations, from the owner's and the invitee's side."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from secrets_app import services
from secrets_app.audit import Actor
from secrets_app.mail import wait_for_queued_mail
from secrets_app.models import ApiKey, Invitation, Membership, User
from tests.concurrency import at_once
from tests.conftest import api_client
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import page

LINK = re.compile(r"https?://[^/\s]+(/invitations/[A-Za-z0-9]+/)")


def _membership(tenant: Tenant, user: User | None = None) -> Membership:
    return Membership.objects.get(workspace=tenant.workspace, user=user or tenant.user)


def _invite(client: Client, tenant: Tenant, email: str, role: str = "member") -> str:
    """Invite through the page; returns the link's path as shown to the owner."""
    response = client.post(page(tenant, "member-invite"), {"email": email, "role": role})
    match = LINK.search(response.content.decode())
    assert match, response.content.decode()
    return match[1]


def test_everyone_sees_the_team(owner: Tenant, member: Tenant, member_client: Client) -> None:
    html = member_client.get(page(owner, "members")).content.decode()
    assert "owner@example.com" in html and "member@example.com" in html
    assert "Only owners invite people and change roles." in html
    assert page(owner, "member-invite") not in html
    assert page(owner, "member-remove", _membership(owner).pk) not in html


def test_owner_changes_a_role(owner: Tenant, member: Tenant, owner_client: Client) -> None:
    target = _membership(owner, member.user)
    html = owner_client.get(page(owner, "members")).content.decode()
    assert page(owner, "member-role", target.pk) in html
    response = owner_client.post(
        page(owner, "member-role", target.pk), {"role": "admin"}, follow=True
    )
    assert "member@example.com is now admin." in response.content.decode()
    assert Membership.objects.get(pk=target.pk).role == "admin"


def test_the_last_owner_is_protected(owner: Tenant, owner_client: Client) -> None:
    mine = _membership(owner)
    response = owner_client.post(
        page(owner, "member-role", mine.pk), {"role": "member"}, follow=True
    )
    assert "A workspace needs an owner" in response.content.decode()
    response = owner_client.post(page(owner, "member-remove", mine.pk), follow=True)
    assert "A workspace needs an owner" in response.content.decode()
    assert Membership.objects.get(pk=mine.pk).role == "owner"


def test_remove_a_member_after_confirming(
    owner: Tenant, member: Tenant, owner_client: Client, member_client: Client
) -> None:
    target = _membership(owner, member.user)
    confirm = owner_client.get(page(owner, "member-remove", target.pk)).content.decode()
    assert "Remove member@example.com?" in confirm
    assert Membership.objects.filter(pk=target.pk).exists()
    response = owner_client.post(page(owner, "member-remove", target.pk), follow=True)
    assert "member@example.com was removed" in response.content.decode()
    assert member_client.get(page(owner, "members")).status_code == 404


def test_invite_shows_the_link_once_and_emails_it(owner: Tenant, owner_client: Client) -> None:
    response = owner_client.post(
        page(owner, "member-invite"), {"email": "New@Example.com", "role": "admin"}
    )
    html = response.content.decode()
    assert "no-store" in response["Cache-Control"]
    assert 'class="copy-box"' in html and "on its way to new@example.com" in html
    path = LINK.search(html)[1]  # type: ignore[index]
    wait_for_queued_mail()
    assert len(mail.outbox) == 1
    email = mail.outbox[0]
    assert email.to == ["new@example.com"] and "Acme" in email.subject
    assert path in email.body and "as admin" in email.body
    listing = owner_client.get(page(owner, "members")).content.decode()
    assert "new@example.com" in listing and "Pending invitations" in listing
    assert path not in listing


def test_a_failed_email_still_leaves_the_link_and_logs_no_address(
    owner: Tenant, owner_client: Client, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    def refuse(*args: object, **kwargs: object) -> int:
        raise OSError("connection refused for new@example.com")

    monkeypatch.setattr("secrets_app.tasks.send_mail", refuse)
    response = owner_client.post(
        page(owner, "member-invite"), {"email": "new@example.com", "role": "member"}
    )
    html = response.content.decode()
    assert "copy the link below" in html and LINK.search(html)
    wait_for_queued_mail()
    assert "mail not sent: OSError" in caplog.text and "new@example.com" not in caplog.text


def test_invite_form_errors(owner: Tenant, member: Tenant, owner_client: Client) -> None:
    bad = owner_client.post(
        page(owner, "member-invite"), {"email": "not-an-email", "role": "member"}
    )
    assert bad.status_code == 200 and "Enter a valid email address." in bad.content.decode()
    again = owner_client.post(
        page(owner, "member-invite"), {"email": "member@example.com", "role": "member"}
    )
    assert "member@example.com is already a member of this workspace." in again.content.decode()
    wait_for_queued_mail()
    assert not Invitation.objects.exists() and mail.outbox == []


def test_revoke_an_invitation(owner: Tenant, owner_client: Client) -> None:
    path = _invite(owner_client, owner, "new@example.com")
    invitation = Invitation.objects.get(workspace=owner.workspace)
    confirm = owner_client.get(page(owner, "invitation-revoke", invitation.pk)).content.decode()
    assert "Revoke the invitation to new@example.com?" in confirm
    response = owner_client.post(page(owner, "invitation-revoke", invitation.pk), follow=True)
    assert "The invitation to new@example.com was revoked." in response.content.decode()
    assert "Pending invitations" not in response.content.decode()
    html = Client().get(path).content.decode()
    assert "This invitation was withdrawn." in html


def test_invitation_end_to_end(owner: Tenant, owner_client: Client) -> None:
    _invite(owner_client, owner, "newbie@example.com")
    wait_for_queued_mail()
    path = LINK.search(mail.outbox[0].body)[1]  # type: ignore[index]
    browser = Client()
    landing = browser.get(path).content.decode()
    assert "You are invited to join Acme as member" in landing
    signup_link = f"{reverse('dashboard:signup')}?next={path}"
    assert f'href="{signup_link}"' in landing
    assert f'href="{reverse("dashboard:login")}?next={path}"' in landing

    signup = browser.get(signup_link)
    assert f'value="{path}"' in signup.content.decode()
    response = browser.post(
        signup_link,
        {"email": "newbie@example.com", "password": "correct horse battery", "next": path},
    )
    assert "Check your email" in response.content.decode()
    wait_for_queued_mail()
    verify = re.search(r"https?://[^/]+(/verify-email/\S+/)", mail.outbox[-1].body)
    assert verify is not None and browser.get(verify[1]).status_code == 302
    response = browser.post(
        f"{reverse('dashboard:login')}?next={path}",
        {"username": "newbie@example.com", "password": "correct horse battery", "next": path},
    )
    assert response["Location"] == path
    join = browser.get(path).content.decode()
    assert "Join Acme" in join
    response = browser.post(path)
    assert response["Location"] == page(owner, "workspace")
    user = User.objects.get(email="newbie@example.com")
    assert _membership(owner, user).role == "member"
    html = browser.get(page(owner, "members")).content.decode()
    assert f'href="{page(owner, "workspace")}"' in html and "Acme" in html
    assert "Welcome to Acme." in html
    assert "already been used" in browser.get(path).content.decode()


def test_an_existing_user_logs_in_through_the_link(owner: Tenant, owner_client: Client) -> None:
    services.user_get_or_create(email="known@example.com", password="pw-known-123")
    path = _invite(owner_client, owner, "known@example.com", role="admin")
    browser = Client()
    response = browser.post(
        f"{reverse('dashboard:login')}?next={path}",
        {"username": "known@example.com", "password": "pw-known-123", "next": path},
    )
    assert response["Location"] == path
    browser.post(path)
    assert _membership(owner, User.objects.get(email="known@example.com")).role == "admin"


def test_the_wrong_account_is_told_so(
    owner: Tenant, outsider: Tenant, owner_client: Client, outsider_client: Client
) -> None:
    path = _invite(owner_client, owner, "someone@example.com")
    html = outsider_client.get(path).content.decode()
    assert "This invitation is for someone@example.com" in html and "Join Acme" not in html
    response = outsider_client.post(path)
    assert "This invitation is for someone@example.com" in response.content.decode()
    assert not Membership.objects.filter(workspace=owner.workspace, user=outsider.user).exists()


def test_expired_and_unknown_links(owner: Tenant, owner_client: Client) -> None:
    path = _invite(owner_client, owner, "late@example.com")
    Invitation.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    assert "This invitation has expired." in Client().get(path).content.decode()
    unknown = Client().get(reverse("dashboard:invitation", args=["nope"]))
    assert unknown.status_code == 404 and "not valid" in unknown.content.decode()


def test_accepting_needs_a_login(owner: Tenant, owner_client: Client) -> None:
    path = _invite(owner_client, owner, "new@example.com")
    response = Client().post(path)
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert Membership.objects.filter(workspace=owner.workspace).count() == 1


@pytest.mark.parametrize(
    ("method", "name", "data"),
    [
        ("get", "member-invite", {}),
        ("post", "member-invite", {"email": "friend@example.com", "role": "owner"}),
        ("post", "member-role", {"role": "member"}),
        ("get", "member-remove", {}),
        ("post", "member-remove", {}),
        ("get", "invitation-revoke", {}),
        ("post", "invitation-revoke", {}),
    ],
)
def test_only_owners_manage_members(
    owner: Tenant,
    member: Tenant,
    owner_client: Client,
    member_client: Client,
    method: str,
    name: str,
    data: dict[str, str],
) -> None:
    services.membership_add(workspace=owner.workspace, user=member.user, role="admin")
    _invite(owner_client, owner, "pending@example.com")
    args = _args(owner, name)
    response = getattr(member_client, method)(page(owner, name, *args), data)
    assert response.status_code == 403
    assert _state(owner) == _expected_state(owner, admin=member.user)


@pytest.mark.parametrize(
    ("method", "name", "data"),
    [
        ("get", "members", {}),
        ("get", "member-invite", {}),
        ("post", "member-invite", {"email": "outsider@example.com", "role": "owner"}),
        ("post", "member-role", {"role": "member"}),
        ("get", "member-remove", {}),
        ("post", "member-remove", {}),
        ("get", "invitation-revoke", {}),
        ("post", "invitation-revoke", {}),
    ],
)
def test_the_outsider_sees_nothing(
    owner: Tenant,
    outsider: Tenant,
    owner_client: Client,
    outsider_client: Client,
    method: str,
    name: str,
    data: dict[str, str],
) -> None:
    _invite(owner_client, owner, "pending@example.com")
    wait_for_queued_mail()
    sent = len(mail.outbox)
    response = getattr(outsider_client, method)(page(owner, name, *_args(owner, name)), data)
    assert response.status_code == 404
    assert "owner@example.com" not in response.content.decode()
    assert _state(owner) == _expected_state(owner)
    wait_for_queued_mail()
    assert len(mail.outbox) == sent
    # Through their own workspace's URLs, the owner's rows are just as unknown.
    if name in ("member-role", "member-remove", "invitation-revoke"):
        own_url = page(outsider, name, *_args(owner, name))
        assert getattr(outsider_client, method)(own_url, data).status_code == 404
        assert _state(owner) == _expected_state(owner)


def _args(owner: Tenant, name: str) -> list[int]:
    if name in ("member-role", "member-remove"):
        return [_membership(owner).pk]
    if name == "invitation-revoke":
        return [Invitation.objects.get(workspace=owner.workspace).pk]
    return []


def _state(tenant: Tenant) -> tuple[object, ...]:
    members = sorted(
        Membership.objects.filter(workspace=tenant.workspace).values_list("user__email", "role")
    )
    invitations = sorted(
        Invitation.objects.filter(workspace=tenant.workspace).values_list("email", "revoked_at")
    )
    return tuple(members), tuple(invitations)


def _expected_state(tenant: Tenant, admin: User | None = None) -> tuple[object, ...]:
    members = [("owner@example.com", "owner")]
    if admin is not None:
        members.append((admin.email, "admin"))
    return tuple(sorted(members)), (("pending@example.com", None),)


def test_removing_a_member_offers_to_revoke_the_keys_they_made(
    owner: Tenant, member: Tenant, owner_client: Client
) -> None:
    from secrets_app.audit import Actor
    from secrets_app.models import ApiKey

    target = Membership.objects.get(workspace=owner.workspace, user=member.user)
    services.membership_set_role(membership=target, role="admin")
    key, _ = services.api_key_create(
        workspace=owner.workspace, kind="secret", label="theirs", actor=Actor(user=member.user)
    )
    confirm = owner_client.get(page(owner, "member-remove", target.pk)).content.decode()
    assert key.display in confirm and 'name="revoke_keys"' in confirm
    response = owner_client.post(
        page(owner, "member-remove", target.pk), {"revoke_keys": "1"}, follow=True
    )
    assert "and 1 of their API keys revoked" in response.content.decode()
    assert ApiKey.objects.get(pk=key.pk).status() == "revoked"
    assert ApiKey.objects.filter(workspace=owner.workspace, revoked_at__isnull=True).count() == 2


# ---------------------------------------------------------------- unverified invitees


def _unverified_admin(owner: Tenant, owner_client: Client) -> tuple[Client, User]:
    """Invited as admin, signed up through the link, joined: the address never verified."""
    path = _invite(owner_client, owner, "admin2@example.com", role="admin")
    browser = Client()
    browser.post(
        f"{reverse('dashboard:signup')}?next={path}",
        {"email": "admin2@example.com", "password": "correct horse battery", "next": path},
    )
    user = User.objects.get(email="admin2@example.com")
    assert user.email_verified_at is None
    browser.force_login(user)
    assert browser.post(path)["Location"] == page(owner, "workspace")
    assert _membership(owner, user).role == "admin"
    return browser, user


def test_an_unverified_invited_admin_makes_no_key_by_rolling_or_creating(
    owner: Tenant, owner_client: Client
) -> None:
    browser, user = _unverified_admin(owner, owner_client)
    server_key = ApiKey.objects.get(workspace=owner.workspace, label="server")
    before = set(ApiKey.objects.values_list("pk", flat=True))
    rolled = browser.post(page(owner, "key-roll", server_key.pk), {"grace": "0"})
    assert (
        "Verify your email first" in rolled.content.decode()
        and "sk_" not in rolled.content.decode()
    )
    made = browser.post(page(owner, "key-new"), {"kind": "secret", "label": "mine"})
    assert "Verify your email first" in made.content.decode()
    assert set(ApiKey.objects.values_list("pk", flat=True)) == before
    assert api_client(owner.secret_key).get("/api/v1/agents").status_code == 200  # untouched
    # Through the services, whatever page calls them, the answer is the same.
    with pytest.raises(services.KeyRejected) as refused:
        services.api_key_roll(key=server_key, actor=Actor(user=user))
    assert refused.value.code == "email_unverified"
    # Verified, the same admin rolls the key (the normal path beside it).
    User.objects.filter(pk=user.pk).update(email_verified_at=timezone.now())
    response = browser.post(page(owner, "key-roll", server_key.pk), {"grace": "0"})
    plaintext = re.search(r"sk_[A-Za-z0-9_-]+", response.content.decode())
    assert plaintext and api_client(plaintext[0]).get("/api/v1/agents").status_code == 200


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_unverified_admin_rolling_at_the_same_instant_gets_nothing(
    owner: Tenant, owner_client: Client
) -> None:
    _browser, user = _unverified_admin(owner, owner_client)
    server_key = ApiKey.objects.get(workspace=owner.workspace, label="server")
    before = ApiKey.objects.count()

    def roll(index: int) -> str:
        browser = Client()
        browser.force_login(user)
        return browser.post(page(owner, "key-roll", server_key.pk), {"grace": "0"}).content.decode()

    pages = at_once(roll, 8)
    assert all("Verify your email first" in html and "sk_" not in html for html in pages)
    assert ApiKey.objects.count() == before
    assert ApiKey.objects.get(pk=server_key.pk).status() == "active"
