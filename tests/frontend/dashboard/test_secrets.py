"""The secrets page: values go in and never come out, in any page, message or log."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from secrets_app import services
from secrets_app.models import Secret
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import page

VALUE = "sk_test_must-never-be-shown-4242"
NEW_VALUE = "sk_test_replacement-never-shown-9999"


@pytest.fixture
def stripe(owner: Tenant) -> Secret:
    secret, _ = services.secret_set(
        workspace=owner.workspace, name="STRIPE_KEY", value=VALUE, allowed_hosts=["api.stripe.com"]
    )
    return secret


def _value(tenant: Tenant, name: str) -> str:
    secret = Secret.objects.get(workspace=tenant.workspace, name=name)
    return services.secret_resolve(secret=secret)


def _shown(response: object, *values: str) -> bool:
    html = response.content.decode()  # type: ignore[attr-defined]
    return any(value in html for value in values)


def test_empty_state_explains_what_secrets_are_for(owner: Tenant, owner_client: Client) -> None:
    html = owner_client.get(page(owner, "secrets")).content.decode()
    assert "No secrets yet" in html and "ctx.secrets.NAME" in html
    assert "only ever sent to the hosts you list" in html


def test_create_a_secret_and_never_see_it_again(
    owner: Tenant, owner_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    form = owner_client.get(page(owner, "secret-new"))
    assert 'type="password"' in form.content.decode()
    response = owner_client.post(
        page(owner, "secret-new"),
        {"name": "STRIPE_KEY", "value": VALUE, "allowed_hosts": "api.stripe.com\n*.example.com"},
        follow=True,
    )
    html = response.content.decode()
    assert "Secret STRIPE_KEY saved." in html
    assert "api.stripe.com" in html and "*.example.com" in html
    assert not _shown(response, VALUE)
    assert _value(owner, "STRIPE_KEY") == VALUE
    for url in (page(owner, "secrets"), page(owner, "secret-replace", "STRIPE_KEY")):
        assert not _shown(owner_client.get(url), VALUE)
    assert VALUE not in caplog.text


def test_a_value_is_not_rendered_back_after_a_validation_error(
    owner: Tenant, owner_client: Client
) -> None:
    response = owner_client.post(
        page(owner, "secret-new"),
        {"name": "stripe key", "value": VALUE, "allowed_hosts": "https://api.stripe.com/v1"},
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "The name must be 1-64 characters of A-Z" in html
    assert "is not a host name" in html
    assert html.count('class="field has-error') == 2
    assert not _shown(response, VALUE)
    assert not Secret.objects.filter(workspace=owner.workspace).exists()


def test_an_existing_name_is_refused_on_the_create_page(
    owner: Tenant, owner_client: Client, stripe: Secret
) -> None:
    response = owner_client.post(
        page(owner, "secret-new"), {"name": "STRIPE_KEY", "value": NEW_VALUE, "allowed_hosts": ""}
    )
    assert "A secret named STRIPE_KEY exists" in response.content.decode()
    assert not _shown(response, VALUE, NEW_VALUE)
    assert _value(owner, "STRIPE_KEY") == VALUE


def test_replace_a_value(owner: Tenant, owner_client: Client, stripe: Secret) -> None:
    form = owner_client.get(page(owner, "secret-replace", "STRIPE_KEY"))
    assert "api.stripe.com" in form.content.decode()  # the hosts are prefilled
    assert not _shown(form, VALUE)
    response = owner_client.post(
        page(owner, "secret-replace", "STRIPE_KEY"),
        {"value": NEW_VALUE, "allowed_hosts": "api.stripe.com"},
        follow=True,
    )
    assert "Secret STRIPE_KEY replaced." in response.content.decode()
    assert not _shown(response, VALUE, NEW_VALUE)
    assert _value(owner, "STRIPE_KEY") == NEW_VALUE


def test_replace_needs_a_value_and_keeps_the_old_one_on_error(
    owner: Tenant, owner_client: Client, stripe: Secret
) -> None:
    response = owner_client.post(
        page(owner, "secret-replace", "STRIPE_KEY"),
        {"value": NEW_VALUE, "allowed_hosts": "not a host"},
    )
    html = response.content.decode()
    assert response.status_code == 200 and "is not a host name" in html
    assert not _shown(response, VALUE, NEW_VALUE)
    empty = owner_client.post(
        page(owner, "secret-replace", "STRIPE_KEY"), {"value": "", "allowed_hosts": ""}
    )
    assert "This field is required." in empty.content.decode()
    assert _value(owner, "STRIPE_KEY") == VALUE


def test_update_hosts_only_keeps_the_value(
    owner: Tenant, owner_client: Client, stripe: Secret
) -> None:
    response = owner_client.post(
        page(owner, "secret-hosts", "STRIPE_KEY"),
        {"allowed_hosts": "API.stripe.com\nfiles.stripe.com"},
        follow=True,
    )
    assert "its value is unchanged" in response.content.decode()
    stripe.refresh_from_db()
    assert stripe.allowed_hosts == ["api.stripe.com", "files.stripe.com"]
    assert _value(owner, "STRIPE_KEY") == VALUE
    assert not _shown(response, VALUE)


def test_delete_goes_through_a_confirmation(
    owner: Tenant, owner_client: Client, stripe: Secret
) -> None:
    confirm = owner_client.get(page(owner, "secret-delete", "STRIPE_KEY"))
    assert "Delete secret" in confirm.content.decode()
    assert Secret.objects.filter(pk=stripe.pk).exists()
    response = owner_client.post(page(owner, "secret-delete", "STRIPE_KEY"), follow=True)
    assert "Secret STRIPE_KEY deleted." in response.content.decode()
    assert not Secret.objects.filter(pk=stripe.pk).exists()


def test_a_member_manages_secrets_too(owner: Tenant, member: Tenant, member_client: Client) -> None:
    response = member_client.post(
        page(owner, "secret-new"),
        {"name": "CRM_TOKEN", "value": VALUE, "allowed_hosts": "crm.example.com"},
        follow=True,
    )
    assert "Secret CRM_TOKEN saved." in response.content.decode()
    assert _value(owner, "CRM_TOKEN") == VALUE


def test_a_missing_secret_is_404(owner: Tenant, owner_client: Client) -> None:
    assert owner_client.get(page(owner, "secret-replace", "NOPE")).status_code == 404


@pytest.mark.parametrize(
    ("method", "name", "data"),
    [
        ("get", "secrets", {}),
        ("get", "secret-new", {}),
        ("post", "secret-new", {"name": "INTRUDER", "value": "x", "allowed_hosts": ""}),
        ("get", "secret-replace", {}),
        ("post", "secret-replace", {"value": "stolen", "allowed_hosts": "evil.example.com"}),
        ("get", "secret-hosts", {}),
        ("post", "secret-hosts", {"allowed_hosts": "evil.example.com"}),
        ("get", "secret-delete", {}),
        ("post", "secret-delete", {}),
    ],
)
def test_the_outsider_sees_nothing(
    owner: Tenant,
    stripe: Secret,
    outsider_client: Client,
    method: str,
    name: str,
    data: dict[str, str],
) -> None:
    args = [] if name in ("secrets", "secret-new") else ["STRIPE_KEY"]
    response = getattr(outsider_client, method)(page(owner, name, *args), data)
    assert response.status_code == 404
    assert "STRIPE_KEY" not in response.content.decode()
    assert list(Secret.objects.filter(workspace=owner.workspace)) == [stripe]
    stripe.refresh_from_db()
    assert stripe.allowed_hosts == ["api.stripe.com"]
    assert _value(owner, "STRIPE_KEY") == VALUE


def test_the_outsider_cannot_reach_a_secret_through_their_own_workspace(
    owner: Tenant, outsider: Tenant, stripe: Secret, outsider_client: Client
) -> None:
    url = page(outsider, "secret-replace", "STRIPE_KEY")
    response = outsider_client.post(url, {"value": "stolen", "allowed_hosts": ""})
    assert response.status_code == 404
    assert not Secret.objects.filter(workspace=outsider.workspace).exists()
    assert _value(owner, "STRIPE_KEY") == VALUE


def test_only_owners_and_admins_choose_where_a_secret_goes(
    owner: Tenant, member: Tenant, member_client: Client, owner_client: Client, stripe: Secret
) -> None:
    assert member_client.get(page(owner, "secret-hosts", "STRIPE_KEY")).status_code == 403
    posted = {"allowed_hosts": "evil.example", "readable_by_code": "on"}
    assert member_client.post(page(owner, "secret-hosts", "STRIPE_KEY"), posted).status_code == 403
    replace_form = member_client.get(page(owner, "secret-replace", "STRIPE_KEY")).content.decode()
    assert "allowed_hosts" not in replace_form and "readable_by_code" not in replace_form
    member_client.post(page(owner, "secret-replace", "STRIPE_KEY"), {"value": NEW_VALUE, **posted})
    stripe.refresh_from_db()
    assert (stripe.allowed_hosts, stripe.readable_by_code) == (["api.stripe.com"], False)
    assert _value(owner, "STRIPE_KEY") == NEW_VALUE  # the value a member may replace
    member_client.post(page(owner, "secret-new"), {"name": "CRM_KEY", "value": VALUE, **posted})
    crm = Secret.objects.get(workspace=owner.workspace, name="CRM_KEY")
    assert (crm.allowed_hosts, crm.readable_by_code) == ([], False)
    listing = member_client.get(page(owner, "secrets")).content.decode()
    assert page(owner, "secret-hosts", "STRIPE_KEY") not in listing

    owner_client.post(page(owner, "secret-hosts", "STRIPE_KEY"), posted)
    stripe.refresh_from_db()
    assert (stripe.allowed_hosts, stripe.readable_by_code) == (["evil.example"], True)
    assert "readable by code" in owner_client.get(page(owner, "secrets")).content.decode()
