"""Sign up, log in, password reset, workspaces and the switcher."""

from __future__ import annotations

import re

from django.core import mail
from django.test import Client
from django.urls import reverse

from secrets_app.models import Membership, User
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import page


def test_sign_up_then_create_a_workspace(db: None) -> None:
    client = Client(enforce_csrf_checks=True)
    form = client.get(reverse("dashboard:signup"))
    token = form.cookies["csrftoken"].value
    response = client.post(
        reverse("dashboard:signup"),
        {
            "email": "New@Example.com",
            "password": "correct horse battery",
            "csrfmiddlewaretoken": token,
        },
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:workspace-new")
    user = User.objects.get(email="new@example.com")
    response = client.post(
        reverse("dashboard:workspace-new"),
        {"name": "Acme Voice", "csrfmiddlewaretoken": client.cookies["csrftoken"].value},
        follow=True,
    )
    membership = Membership.objects.get(user=user)
    assert membership.role == "owner" and membership.workspace.name == "Acme Voice"
    assert response.redirect_chain[-1][0] == reverse(
        "dashboard:agents", args=[membership.workspace.pk]
    )
    assert "Acme Voice" in response.content.decode()


def test_sign_up_shows_field_errors(owner: Tenant) -> None:
    response = Client().post(
        reverse("dashboard:signup"), {"email": "owner@example.com", "password": "123"}
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "An account with this email exists" in html
    assert User.objects.filter(email="owner@example.com").count() == 1


def test_weak_password_is_refused_with_a_reason(db: None) -> None:
    response = Client().post(
        reverse("dashboard:signup"), {"email": "a@example.com", "password": "12345678"}
    )
    assert "entirely numeric" in response.content.decode()
    assert not User.objects.filter(email="a@example.com").exists()


def test_forms_refuse_posts_without_csrf(db: None) -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post(
        reverse("dashboard:signup"), {"email": "b@example.com", "password": "correct horse battery"}
    )
    assert response.status_code == 403
    assert not User.objects.filter(email="b@example.com").exists()


def test_log_in_and_out(owner: Tenant) -> None:
    client = Client()
    response = client.post(
        reverse("dashboard:login"),
        {"username": "owner@example.com", "password": "pw-owner@example.com"},
    )
    assert response.status_code == 302
    home = client.get(reverse("dashboard:home"))
    assert home["Location"] == page(owner, "workspace")
    client.post(reverse("dashboard:logout"))
    assert client.get(page(owner, "agents"))["Location"].startswith(reverse("dashboard:login"))


def test_wrong_password_says_so(owner: Tenant) -> None:
    response = Client().post(
        reverse("dashboard:login"), {"username": "owner@example.com", "password": "nope"}
    )
    assert response.status_code == 200
    assert "correct email address and password" in response.content.decode()


def test_password_reset_by_email(owner: Tenant) -> None:
    client = Client()
    client.post(reverse("dashboard:password-reset"), {"email": "OWNER@example.com"})
    assert len(mail.outbox) == 1
    link = re.search(r"https?://[^/]+(/password-reset/\S+/)", mail.outbox[0].body)
    assert link, mail.outbox[0].body
    form = client.get(link[1], follow=True)
    assert form.status_code == 200 and "Choose a new password" in form.content.decode()
    client.post(
        form.redirect_chain[-1][0],
        {"new_password1": "a brand new passphrase", "new_password2": "a brand new passphrase"},
    )
    assert Client().login(username="owner@example.com", password="a brand new passphrase")


def test_unknown_email_sends_nothing_but_looks_the_same(db: None) -> None:
    response = Client().post(
        reverse("dashboard:password-reset"), {"email": "nobody@example.com"}, follow=True
    )
    assert "Check your email" in response.content.decode()
    assert mail.outbox == []


def test_switch_between_workspaces(owner: Tenant, outsider: Tenant) -> None:
    from secrets_app import services

    services.membership_add(workspace=outsider.workspace, user=owner.user, role="member")
    client = Client()
    client.force_login(owner.user)
    html = client.get(page(owner, "agents")).content.decode()
    assert "Other Corp" in html and page(outsider, "workspace") in html
    client.get(page(outsider, "agents"))
    assert client.get(reverse("dashboard:home"))["Location"] == page(outsider, "workspace")


def test_a_stranger_gets_404_for_every_workspace_page(
    owner: Tenant, outsider_client: Client
) -> None:
    for name in ("workspace", "agents", "playground", "sessions", "secrets", "keys", "members"):
        assert outsider_client.get(page(owner, name)).status_code == 404, name
    assert outsider_client.get("/w/999999/agents/").status_code == 404


def test_pages_need_a_login(owner: Tenant) -> None:
    response = Client().get(page(owner, "agents"))
    assert response.status_code == 302 and response["Location"].startswith("/login/")
