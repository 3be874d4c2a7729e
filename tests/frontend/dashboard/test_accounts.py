"""Sign up, log in, password reset, workspaces and the switcher."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from django.core import mail
from django.core.mail.backends import locmem
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from engine.protocol import CloseCode
from secrets_app import services
from secrets_app.mail import wait_for_queued_mail
from secrets_app.models import Membership, User
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import page


def without_nonce(html: str) -> str:
    return re.sub(r'nonce="[^"]+"', "", html)


def _link(path: str, body: str) -> str:
    found = re.search(rf"https?://[^/]+({path}\S+/)", body)
    assert found, body
    return found[1]


@pytest.mark.django_db(transaction=True)
def test_sign_up_verify_log_in_then_create_a_workspace() -> None:
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
    assert response.status_code == 200 and "Check your email" in response.content.decode()
    user = User.objects.get(email="new@example.com")
    assert user.email_verified_at is None
    wait_for_queued_mail()
    (message,) = mail.outbox
    assert message.to == ["new@example.com"] and "verify" in message.subject.lower()
    verified = client.get(_link("/verify-email/", message.body), follow=True)
    assert "new@example.com is verified." in verified.content.decode()
    user.refresh_from_db()
    assert user.email_verified_at is not None
    client.post(
        reverse("dashboard:login"),
        {
            "username": "new@example.com",
            "password": "correct horse battery",
            "csrfmiddlewaretoken": client.cookies["csrftoken"].value,
        },
    )
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


@pytest.mark.django_db(transaction=True)
def test_sign_up_never_says_whether_an_account_exists(owner: Tenant) -> None:
    known = Client().post(
        reverse("dashboard:signup"), {"email": "owner@example.com", "password": "another pass 42"}
    )
    new = Client().post(
        reverse("dashboard:signup"), {"email": "fresh@example.com", "password": "another pass 42"}
    )
    assert known.status_code == new.status_code == 200
    # The same page, but for the address it names (and each response's own CSP nonce).
    known_page = without_nonce(known.content.decode().replace("owner@example.com", "X"))
    assert known_page == without_nonce(new.content.decode().replace("fresh@example.com", "X"))
    wait_for_queued_mail()
    to_owner = next(m for m in mail.outbox if m.to == ["owner@example.com"])
    assert "already has an account" in to_owner.body and "/password-reset/" in to_owner.body
    # Nothing about the existing account changed.
    assert Client().login(username="owner@example.com", password="pw-owner@example.com")
    assert User.objects.filter(email="owner@example.com").count() == 1


def test_an_unverified_account_cannot_create_api_keys(db: None) -> None:
    user = User.objects.create_user(email="unverified@example.com", password="x" * 12)
    workspace = services.workspace_create(name="Fresh", owner=user)
    client = Client()
    client.force_login(user)
    url = reverse("dashboard:key-new", args=[workspace.pk])
    assert "Verify your email first" in client.get(url).content.decode()
    client.post(url, {"kind": "secret", "label": "x"})
    assert not workspace.api_keys.exists()


def test_a_broken_verification_link_says_so(db: None) -> None:
    response = Client().get(reverse("dashboard:verify-email", args=["nope:nope"]), follow=True)
    assert "This link is not valid" in response.content.decode()


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


class HeldMail(locmem.EmailBackend):
    """An SMTP server that answers only once the test lets it (or after 10 s)."""

    released = threading.Event()

    def send_messages(self, messages: Any) -> int:
        self.released.wait(10)
        return super().send_messages(messages)


@pytest.mark.django_db(transaction=True)
def test_password_reset_by_email(owner: Tenant) -> None:
    client = Client()
    client.post(reverse("dashboard:password-reset"), {"email": "OWNER@example.com"})
    wait_for_queued_mail()
    assert len(mail.outbox) == 1
    link = _link("/password-reset/", mail.outbox[0].body)
    form = client.get(link, follow=True)
    assert form.status_code == 200 and "Choose a new password" in form.content.decode()
    client.post(
        form.redirect_chain[-1][0],
        {"new_password1": "a brand new passphrase", "new_password2": "a brand new passphrase"},
    )
    assert Client().login(username="owner@example.com", password="a brand new passphrase")


@pytest.mark.django_db(transaction=True)
def test_unknown_email_sends_nothing_but_looks_and_takes_the_same(
    owner: Tenant, settings: Any
) -> None:
    settings.EMAIL_BACKEND = f"{__name__}.HeldMail"

    def answer(email: str) -> str:
        response = Client().post(reverse("dashboard:password-reset"), {"email": email}, follow=True)
        return str(response.content.decode())

    HeldMail.released.clear()
    try:
        known_page = answer("owner@example.com")
        unknown_page = answer("nobody@example.com")
        # Both answers came back while the SMTP server still held the mail: neither waits
        # for it, so a known address takes no longer than an unknown one, however busy the
        # machine is.
        assert mail.outbox == []
    finally:
        HeldMail.released.set()
    assert without_nonce(known_page) == without_nonce(unknown_page)
    assert "Check your email" in known_page
    wait_for_queued_mail()
    assert [m.to for m in mail.outbox] == [["owner@example.com"]]


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


def test_a_key_an_unverified_account_made_before_works_nowhere(owner: Tenant) -> None:
    """A key made by an unverified person through a path closed since (the old roll) is
    refused by the REST API and the WebSocket until that person verifies."""
    from realtime import access
    from secrets_app.models import ApiKey
    from tests.conftest import api_client

    user = User.objects.create_user(email="early@example.com", password="x" * 12)
    services.membership_add(workspace=owner.workspace, user=user, role="admin")
    plaintexts = {}
    for kind in (ApiKey.Kind.SECRET, ApiKey.Kind.PUBLISHABLE):
        key, plaintexts[kind] = services.api_key_create(workspace=owner.workspace, kind=kind)
        ApiKey.objects.filter(pk=key.pk).update(created_by=user)  # made "by" them
    secret_plain, publishable = plaintexts[ApiKey.Kind.SECRET], plaintexts["publishable"]
    refused = api_client(secret_plain).get("/api/v1/agents")
    assert refused.status_code == 401 and "not verified" in refused.json()["error"]["message"]
    with pytest.raises(access.ConnectionRefused) as closed:
        access.authorize_connection(
            key=publishable, origin="http://localhost:3000", agent_slug=None
        )
    assert closed.value.close_code == CloseCode.BAD_KEY
    User.objects.filter(pk=user.pk).update(email_verified_at=timezone.now())
    assert api_client(secret_plain).get("/api/v1/agents").status_code == 200
    assert access.authorize_connection(
        key=publishable, origin="http://localhost:3000", agent_slug=None
    )


def test_the_login_email_field_is_an_email_field(db: None) -> None:
    html = Client().get(reverse("dashboard:login")).content.decode()
    field = re.search(r'<input[^>]*name="username"[^>]*>', html)
    assert field, html
    assert 'type="email"' in field[0] and 'autocomplete="username"' in field[0]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("printed", [True, False])
def test_check_your_email_says_where_development_mail_went(settings: Any, printed: bool) -> None:
    """./dev.sh prints mail in its console: the page says so, and only then."""
    if printed:
        settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    signup = Client().post(
        reverse("dashboard:signup"), {"email": "dev@example.com", "password": "another pass 42"}
    )
    reset = Client().post(
        reverse("dashboard:password-reset"), {"email": "dev@example.com"}, follow=True
    )
    wait_for_queued_mail()
    for page_html in (signup.content.decode(), reset.content.decode()):
        assert "Check your email" in page_html
        assert ("printed in the console that runs" in page_html) is printed
