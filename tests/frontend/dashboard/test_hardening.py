"""The dashboard as an attacker meets it: throttled logins (dashboard and admin), a second
factor, Content-Security-Policy with nonces, HSTS and the right absolute URLs behind a
TLS-terminating proxy, and an audit log only owners see."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse
from django_otp.oath import totp
from django_otp.plugins.otp_totp.models import TOTPDevice

from frontend.dashboard.accounts import LOGIN_REFUSED
from secrets_app.mail import wait_for_queued_mail
from secrets_app.models import ApiKey, AuditEvent, User
from sessions_app import services as agent_services
from tests.concurrency import at_once
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import page

PASSWORD = "pw-owner@example.com"


def _login(email: str, password: str, *, address: str = "198.51.100.7", **extra: str) -> Any:
    return Client(REMOTE_ADDR=address).post(
        reverse("dashboard:login"), {"username": email, "password": password, **extra}
    )


# ---------------------------------------------------------------- logins


def test_wrong_passwords_lock_the_account_even_for_the_right_one(
    owner: Tenant, member: Tenant, settings: Any
) -> None:
    settings.LOGIN_FAILURES_PER_ACCOUNT = 5
    for attempt in range(5):
        response = _login("owner@example.com", f"guess-{attempt}", address=f"203.0.113.{attempt}")
        assert "correct email address and password" in response.content.decode()
    refused = _login("owner@example.com", PASSWORD, address="203.0.113.99")
    assert refused.status_code == 200
    assert "Too many failed logins. Try again in 15 min." in refused.content.decode()
    # Nobody else is disturbed: another account logs in from the same address.
    assert _login("member@example.com", "pw-member-1", address="203.0.113.1").status_code == 302


def test_one_address_guessing_many_accounts_is_stopped(owner: Tenant, settings: Any) -> None:
    settings.LOGIN_FAILURES_PER_ADDRESS = 3
    for n in range(3):
        _login(f"someone{n}@example.com", "guess")
    refused = _login("owner@example.com", PASSWORD)
    assert "Too many failed logins" in refused.content.decode()
    assert _login("owner@example.com", PASSWORD, address="192.0.2.50").status_code == 302


def test_the_admin_logs_in_through_the_same_throttled_door(owner: Tenant, settings: Any) -> None:
    User.objects.create_superuser(email="staff@example.com", password="pw-staff-123")
    settings.LOGIN_FAILURES_PER_ACCOUNT = 2
    response = Client().get("/admin/")
    assert response.status_code == 302
    login = Client().get(response["Location"], follow=True)
    assert login.redirect_chain[-1][0].startswith(reverse("dashboard:login") + "?next=")
    for guess in ("a", "b"):
        _login("staff@example.com", guess)
    assert "Too many failed logins" in _login("staff@example.com", "pw-staff-123").content.decode()
    # A logged-in customer (not staff) gets a refusal, not a login loop.
    customer = Client()
    customer.force_login(owner.user)
    assert customer.get("/admin/login/?next=/admin/").status_code == 403


# ---------------------------------------------------------------- two-factor


def _enable_totp(client: Client) -> TOTPDevice:
    client.get(reverse("dashboard:security"))
    device = TOTPDevice.objects.get(confirmed=False)
    response = client.post(reverse("dashboard:security"), {"code": f"{totp(device.bin_key):06d}"})
    assert response.status_code == 302
    device.refresh_from_db()
    assert device.confirmed
    return device


def test_two_factor_login(owner: Tenant) -> None:
    client = Client()
    client.force_login(owner.user)
    page_html = client.get(reverse("dashboard:security")).content.decode()
    assert "<svg" in page_html and "Turn two-factor login on" in page_html
    device = _enable_totp(client)

    without = _login("owner@example.com", PASSWORD)
    assert LOGIN_REFUSED in without.content.decode()
    wrong = _login("owner@example.com", PASSWORD, otp_token="000000")
    assert LOGIN_REFUSED in wrong.content.decode()
    time.sleep(1.1)  # django-otp itself makes a device wait a second after a wrong code
    code = f"{totp(device.bin_key, drift=1):06d}"  # the next step: the first one was used
    right = Client(REMOTE_ADDR="198.51.100.7")
    response = right.post(
        reverse("dashboard:login"),
        {"username": "owner@example.com", "password": PASSWORD, "otp_token": code},
    )
    assert response.status_code == 302
    assert right.get(page(owner, "agents")).status_code == 200


def test_a_wrong_code_counts_as_a_failed_login(owner: Tenant, settings: Any) -> None:
    settings.LOGIN_FAILURES_PER_ACCOUNT = 3
    client = Client()
    client.force_login(owner.user)
    device = _enable_totp(client)
    for _ in range(3):
        _login("owner@example.com", PASSWORD, otp_token="123456")
    code = f"{totp(device.bin_key, drift=1):06d}"
    refused = _login("owner@example.com", PASSWORD, otp_token=code)
    assert "Too many failed logins" in refused.content.decode()


def _answer(response: Any) -> str:
    """What a login page says, without what differs per request or was typed (the nonce, the
    CSRF token, the fields' values)."""
    html = response.content.decode()
    return re.sub(r'\s(nonce|value)="[^"]*"', "", html)


def test_with_two_factor_on_a_right_and_a_wrong_password_get_the_same_answer(
    owner: Tenant,
) -> None:
    """No password oracle: until a right code comes with it, a right password is answered
    exactly as a wrong one (and as an unknown account), with or without a code."""
    client = Client()
    client.force_login(owner.user)
    _enable_totp(client)
    attempts = [
        ("owner@example.com", PASSWORD, {}),
        ("owner@example.com", "wrong-password", {}),
        ("owner@example.com", PASSWORD, {"otp_token": "000000"}),
        ("owner@example.com", "wrong-password", {"otp_token": "000000"}),
        ("nobody@example.com", "wrong-password", {}),
    ]
    answers = {
        _answer(_login(email, password, address=f"198.51.100.{n}", **extra))
        for n, (email, password, extra) in enumerate(attempts)
    }
    assert len(answers) == 1 and LOGIN_REFUSED in answers.pop()


@pytest.mark.django_db(transaction=True)
def test_password_guesses_at_once_learn_nothing_and_are_still_throttled(
    owner: Tenant, member: Tenant, settings: Any
) -> None:
    settings.LOGIN_FAILURES_PER_ACCOUNT = 5
    client = Client()
    client.force_login(owner.user)
    device = _enable_totp(client)

    def guess(index: int) -> tuple[bool, str]:
        right = index % 2 == 0
        password = PASSWORD if right else f"guess-{index}"
        return right, _answer(_login("owner@example.com", password, address=f"203.0.113.{index}"))

    answers = at_once(guess, 10)
    said = {answer for _right, answer in answers}
    assert all(LOGIN_REFUSED in a or "Too many failed logins" in a for a in said)
    for answer in said:  # whatever was said was said to right and wrong passwords alike
        assert {right for right, a in answers if a == answer} == {True, False}, answer[-300:]
    code = f"{totp(device.bin_key):06d}"
    refused = _login("owner@example.com", PASSWORD, address="203.0.113.99", otp_token=code)
    assert "Too many failed logins" in refused.content.decode()
    # Beside it, another account logs in at once.
    assert _login("member@example.com", "pw-member-1", address="203.0.113.1").status_code == 302


# ---------------------------------------------------------------- headers and URLs


def test_pages_carry_a_csp_with_a_fresh_nonce_and_no_inline_script(
    owner: Tenant, owner_client: Client
) -> None:
    first = Client().get("/login/")
    second = Client().get("/login/")
    policy = first["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "object-src 'none'" in policy
    script_src = re.search(r"script-src ([^;]+)", policy)
    assert script_src is not None
    assert "'unsafe-inline'" not in script_src[1] and "http" not in script_src[1]
    nonce = re.search(r"'nonce-([^']+)'", script_src[1])
    assert nonce is not None and f'nonce="{nonce[1]}"' in first.content.decode()
    assert nonce[1] not in second["Content-Security-Policy"]
    for name in ("agents", "agent-new", "keys", "key-new", "sessions", "playground", "audit"):
        html = owner_client.get(page(owner, name)).content.decode()
        for tag in re.findall(r"<script\b[^>]*>", html):
            assert "nonce=" in tag and "src=" in tag, tag  # no inline script at all


@pytest.fixture
def behind_tls_proxy(settings: Any) -> None:
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.USE_X_FORWARDED_HOST = True
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.ALLOWED_HOSTS = ["platform.example.com", "testserver"]


def test_behind_a_tls_proxy_hsts_and_https_urls(
    owner: Tenant, owner_client: Client, behind_tls_proxy: None
) -> None:
    proxied = {"HTTP_X_FORWARDED_PROTO": "https", "HTTP_X_FORWARDED_HOST": "platform.example.com"}
    response = Client().get("/login/", **proxied)
    assert response["Strict-Transport-Security"].startswith("max-age=31536000")
    assert "Strict-Transport-Security" not in Client().get("/login/")  # plain http
    invited = owner_client.post(
        page(owner, "member-invite"), {"email": "new@example.com", "role": "member"}, **proxied
    ).content.decode()
    assert "https://platform.example.com/invitations/" in invited
    wait_for_queued_mail()
    assert "https://platform.example.com/invitations/" in mail.outbox[-1].body
    agent_services.agent_create(workspace=owner.workspace, name="Desk", slug="desk")
    owner_client.get(page(owner, "playground"), **proxied)
    key = ApiKey.objects.get(workspace=owner.workspace, label="Dashboard playground")
    assert key.allowed_origins == ["https://platform.example.com"]


# ---------------------------------------------------------------- the audit log


def test_the_audit_log_shows_who_did_what_from_where_to_owners_only(
    owner: Tenant, member: Tenant, owner_client: Client, member_client: Client
) -> None:
    owner_client.post(
        page(owner, "key-new"), {"kind": "secret", "label": "ci", "scopes": ["agents"]},
        REMOTE_ADDR="192.0.2.10",
    )  # fmt: skip
    event = AuditEvent.objects.get(
        workspace=owner.workspace, action="key.created", actor_user__isnull=False
    )
    assert event.actor_user == owner.user and event.address == "192.0.2.10"
    assert event.details == {"kind": "secret", "label": "ci", "scopes": ["agents"]}
    html = owner_client.get(page(owner, "audit")).content.decode()
    assert "key.created" in html and "owner@example.com" in html and "192.0.2.10" in html
    assert member_client.get(page(owner, "audit")).status_code == 403
    assert "Audit log" not in member_client.get(page(owner, "agents")).content.decode()


def test_the_outsider_sees_no_audit_log(owner: Tenant, outsider_client: Client) -> None:
    assert outsider_client.get(page(owner, "audit")).status_code == 404
