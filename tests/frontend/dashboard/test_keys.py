"""The API keys page: list, create (secret keys shown once), roll, revoke, and who may."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from secrets_app import services
from secrets_app.models import ApiKey, AuditEvent
from secrets_app.services import KeyRejected
from sessions_app import services as agent_services
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import page

SECRET_KEY = re.compile(r"sk_[A-Za-z0-9]{20,}")


def _key(tenant: Tenant, kind: str) -> ApiKey:
    return ApiKey.objects.get(workspace=tenant.workspace, kind=kind, rolled_from=None)


def _accepts(plaintext: str, kind: str) -> bool:
    try:
        services.api_key_authenticate(plaintext=plaintext, kind=kind)
    except KeyRejected:
        return False
    return True


def _all_db_text() -> str:
    return repr(list(ApiKey.objects.values()))


def test_list_shows_keys_with_their_limits(owner: Tenant, owner_client: Client) -> None:
    services.api_key_create(
        workspace=owner.workspace,
        kind="publishable",
        label="shop",
        allowed_origins=["https://shop.example.com"],
        allowed_agents=["orders"],
        allow_inline_config=False,
    )
    secret = _key(owner, "secret")
    html = owner_client.get(page(owner, "keys")).content.decode()
    assert "shop" in html and "https://shop.example.com" in html and "orders" in html
    assert "all agents" in html  # the fixture's "browser" key has no agent limit
    assert owner.publishable_key in html  # publishable keys are public: shown in full
    assert secret.display in html and owner.secret_key not in html
    assert "never" in html  # no key was used yet
    assert "Create key" in html


def test_last_used_is_shown_once_a_key_is_used(owner: Tenant, owner_client: Client) -> None:
    assert owner_client.get(page(owner, "keys")).content.decode().count(">never<") == 2
    services.api_key_authenticate(plaintext=owner.secret_key, kind="secret")
    html = owner_client.get(page(owner, "keys")).content.decode()
    # Used a moment ago: "just now" ("0 minutes ago" said nothing), later in minutes.
    assert html.count(">never<") == 1 and ">just now<" in html and "0 minutes" not in html


def test_secret_key_plaintext_is_shown_exactly_once(owner: Tenant, owner_client: Client) -> None:
    response = owner_client.post(
        page(owner, "key-new"), {"kind": "secret", "label": "billing server"}
    )
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    html = response.content.decode()
    assert "Copy this key now. For your security it will not be shown again." in html
    shown = SECRET_KEY.findall(html)
    assert len(set(shown)) == 1
    plaintext = shown[0]
    key = ApiKey.objects.get(workspace=owner.workspace, label="billing server")
    assert key.kind == "secret" and _accepts(plaintext, "secret")

    later = owner_client.get(page(owner, "keys")).content.decode()
    assert key.display in later and plaintext not in later
    assert plaintext not in _all_db_text()
    assert plaintext not in repr(dict(owner_client.session))


def test_publishable_key_is_created_with_its_limits(owner: Tenant, owner_client: Client) -> None:
    agent_services.agent_create(workspace=owner.workspace, name="Orders", slug="orders")
    agent_services.agent_create(workspace=owner.workspace, name="Support", slug="support")
    form = owner_client.get(page(owner, "key-new")).content.decode()
    assert "Orders (orders)" in form and "must be listed" in form
    response = owner_client.post(
        page(owner, "key-new"),
        {
            "kind": "publishable",
            "label": "shop",
            "allowed_origins": "https://Shop.example.com\n\nhttps://www.example.com:443\n",
            "allowed_agents": ["orders"],
        },
        follow=True,
    )
    key = ApiKey.objects.get(workspace=owner.workspace, label="shop")
    assert key.allowed_origins == ["https://shop.example.com", "https://www.example.com"]
    assert key.allowed_agents == ["orders"] and key.allow_inline_config is False
    html = response.content.decode()
    assert f"Publishable key {key.display} created." in html
    assert key.publishable_key in html


def test_bad_origins_are_field_errors(owner: Tenant, owner_client: Client) -> None:
    before = ApiKey.objects.count()
    response = owner_client.post(
        page(owner, "key-new"),
        {"kind": "publishable", "allowed_origins": "https://shop.example.com/checkout"},
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "without a path" in html and 'class="field has-error' in html
    assert ApiKey.objects.count() == before


def test_a_publishable_keys_switches_are_turned_on_in_its_settings(
    owner: Tenant, owner_client: Client
) -> None:
    key, _plaintext = services.api_key_create(workspace=owner.workspace, kind="publishable")
    assert page(owner, "key-edit", key.pk) in owner_client.get(page(owner, "keys")).content.decode()
    form = owner_client.get(page(owner, "key-edit", key.pk)).content.decode()
    assert "Pages may configure the agent themselves" in form
    assert "Pages may send server-tool code" in form
    response = owner_client.post(
        page(owner, "key-edit", key.pk),
        {"label": "seed", "allowed_origins": "https://shop.example.com",
         "allow_inline_config": "on", "allow_inline_tool_code": "on"},
        follow=True,
    )  # fmt: skip
    assert f"Key {key.display} saved." in response.content.decode()
    key.refresh_from_db()
    assert (key.label, key.allowed_origins) == ("seed", ["https://shop.example.com"])
    assert key.allow_inline_config and key.allow_inline_tool_code and not key.tokens_only
    assert AuditEvent.objects.filter(workspace=owner.workspace, action="key.updated").exists()
    bad = owner_client.post(page(owner, "key-edit", key.pk), {"allowed_origins": "not a url"})
    assert bad.status_code == 200 and "has-error" in bad.content.decode()


def test_a_secret_key_has_no_settings_page(owner: Tenant, owner_client: Client) -> None:
    key = _key(owner, "secret")
    response = owner_client.post(
        page(owner, "key-edit", key.pk), {"allow_inline_config": "on"}, follow=True
    )
    assert "only active publishable keys have settings" in response.content.decode()
    key.refresh_from_db()
    assert not key.allow_inline_config


def test_roll_a_secret_key_with_no_grace(owner: Tenant, owner_client: Client) -> None:
    old = _key(owner, "secret")
    confirm = owner_client.get(page(owner, "key-roll", old.pk)).content.decode()
    assert "the old key keeps working for" in confirm.lower() and "7 days" in confirm
    response = owner_client.post(page(owner, "key-roll", old.pk), {"grace": "0"})
    assert "no-store" in response["Cache-Control"]
    html = response.content.decode()
    assert f"the old key {old.display} no longer works" in html
    new_plaintext = SECRET_KEY.findall(html)[0]
    assert new_plaintext != owner.secret_key
    assert _accepts(new_plaintext, "secret")
    assert not _accepts(owner.secret_key, "secret")
    assert new_plaintext not in owner_client.get(page(owner, "keys")).content.decode()


def test_rolling_a_secret_key_with_grace_says_until_when(
    owner: Tenant, owner_client: Client
) -> None:
    old = _key(owner, "secret")
    response = owner_client.post(page(owner, "key-roll", old.pk), {"grace": "604800"})
    old.refresh_from_db()
    until = timezone.localtime(old.expires_at).strftime("%Y-%m-%d %H:%M")
    assert f"the old key {old.display} works until {until}" in response.content.decode()
    assert _accepts(owner.secret_key, "secret")


def test_roll_with_a_grace_period_keeps_the_old_key_working(
    owner: Tenant, owner_client: Client
) -> None:
    old = _key(owner, "publishable")
    response = owner_client.post(page(owner, "key-roll", old.pk), {"grace": "3600"}, follow=True)
    new = ApiKey.objects.get(rolled_from=old)
    assert _accepts(owner.publishable_key, "publishable")
    assert _accepts(new.publishable_key, "publishable")
    html = response.content.decode()
    assert "expires in" in html and new.publishable_key in html


def test_revoke_goes_through_a_confirmation(owner: Tenant, owner_client: Client) -> None:
    key = _key(owner, "secret")
    confirm = owner_client.get(page(owner, "key-revoke", key.pk))
    assert f"Revoke key {key.display}?" in confirm.content.decode()
    assert _accepts(owner.secret_key, "secret")  # looking is not revoking
    response = owner_client.post(page(owner, "key-revoke", key.pk), follow=True)
    assert f"Key {key.display} revoked." in response.content.decode()
    assert not _accepts(owner.secret_key, "secret")


def test_revoked_keys_stay_listed_without_actions(owner: Tenant, owner_client: Client) -> None:
    key = _key(owner, "secret")
    services.api_key_revoke(key=key)
    html = owner_client.get(page(owner, "keys")).content.decode()
    assert key.display in html and "revoked" in html and 'class="inactive"' in html
    assert page(owner, "key-revoke", key.pk) not in html
    assert page(owner, "key-roll", key.pk) not in html
    response = owner_client.post(page(owner, "key-roll", key.pk), {"grace": "0"}, follow=True)
    assert "only active keys can be rolled" in response.content.decode()
    assert not ApiKey.objects.filter(rolled_from=key).exists()


def test_a_member_sees_keys_but_cannot_manage_them(
    owner: Tenant, member: Tenant, member_client: Client
) -> None:
    key = _key(owner, "secret")
    html = member_client.get(page(owner, "keys")).content.decode()
    assert "Only owners and admins manage API keys" in html
    assert key.display in html
    assert page(owner, "key-new") not in html
    assert page(owner, "key-roll", key.pk) not in html
    assert page(owner, "key-revoke", key.pk) not in html
    assert member_client.get(page(owner, "key-new")).status_code == 403
    assert member_client.post(page(owner, "key-new"), {"kind": "secret"}).status_code == 403
    assert member_client.get(page(owner, "key-roll", key.pk)).status_code == 403
    publishable = _key(owner, "publishable")
    assert page(owner, "key-edit", publishable.pk) not in html
    edit = page(owner, "key-edit", publishable.pk)
    assert member_client.post(edit, {"label": "member"}).status_code == 403
    assert _key(owner, "publishable").label != "member"
    assert member_client.post(page(owner, "key-roll", key.pk), {"grace": "0"}).status_code == 403
    assert member_client.post(page(owner, "key-revoke", key.pk)).status_code == 403
    assert ApiKey.objects.filter(workspace=owner.workspace).count() == 2
    assert _accepts(owner.secret_key, "secret")


def test_an_admin_manages_keys(owner: Tenant, member: Tenant, member_client: Client) -> None:
    services.membership_add(workspace=owner.workspace, user=member.user, role="admin")
    response = member_client.post(page(owner, "key-new"), {"kind": "secret", "label": "ci"})
    assert "Copy this key now" in response.content.decode()


@pytest.mark.parametrize(
    ("method", "name", "data"),
    [
        ("get", "keys", {}),
        ("get", "key-new", {}),
        ("post", "key-new", {"kind": "secret", "label": "intruder"}),
        ("get", "key-roll", {}),
        ("post", "key-roll", {"grace": "0"}),
        ("get", "key-revoke", {}),
        ("post", "key-revoke", {}),
        ("get", "key-edit", {}),
        ("post", "key-edit", {"label": "intruder"}),
    ],
)
def test_the_outsider_sees_nothing(
    owner: Tenant, outsider_client: Client, method: str, name: str, data: dict[str, str]
) -> None:
    key = _key(owner, "publishable" if name == "key-edit" else "secret")
    with_key = ("key-roll", "key-revoke", "key-edit")
    url = page(owner, name, key.pk) if name in with_key else page(owner, name)
    response = getattr(outsider_client, method)(url, data)
    assert response.status_code == 404
    assert owner.secret_key not in response.content.decode()
    assert ApiKey.objects.filter(workspace=owner.workspace).count() == 2
    assert _accepts(owner.secret_key, "secret")
    assert ApiKey.objects.get(pk=key.pk).label != "intruder"


def test_the_outsider_cannot_reach_a_key_through_their_own_workspace(
    owner: Tenant, outsider: Tenant, outsider_client: Client
) -> None:
    key = _key(owner, "secret")
    assert outsider_client.get(page(outsider, "key-roll", key.pk)).status_code == 404
    assert outsider_client.post(page(outsider, "key-revoke", key.pk)).status_code == 404
    publishable = _key(owner, "publishable")
    edit = page(outsider, "key-edit", publishable.pk)
    assert outsider_client.post(edit, {"label": "intruder"}).status_code == 404
    publishable.refresh_from_db()
    assert publishable.label != "intruder"
    assert _accepts(owner.secret_key, "secret")
