"""The Django admin: every model is there; key hashes and secret values never are."""

from __future__ import annotations

import pytest

from secrets_app import services
from secrets_app.models import ApiKey, Secret, User
from sessions_app import services as agent_services

SECRET_VALUE = "admin-must-never-show-this"


@pytest.fixture
def admin_client(client, owner):
    staff = User.objects.create_superuser(email="staff@example.com", password="pw-staff-123")
    client.force_login(staff)
    services.secret_set(
        workspace=owner.workspace, name="PAYMENT_KEY", value=SECRET_VALUE, allowed_hosts=[]
    )
    agent_services.agent_create(workspace=owner.workspace, name="Orders", slug="orders")
    return client


@pytest.mark.parametrize(
    "model",
    ["user", "workspace", "membership", "apikey", "secret"],
)
def test_changelists_render(admin_client, model):
    response = admin_client.get(f"/admin/secrets_app/{model}/")
    assert response.status_code == 200


@pytest.mark.parametrize("model", ["agent", "session"])
def test_session_app_changelists_render(admin_client, model):
    assert admin_client.get(f"/admin/sessions_app/{model}/").status_code == 200


def test_keys_show_only_prefix_and_last4(admin_client, owner):
    key = ApiKey.objects.get(workspace=owner.workspace, kind="secret")
    pages = [
        admin_client.get("/admin/secrets_app/apikey/").content,
        admin_client.get(f"/admin/secrets_app/apikey/{key.pk}/change/").content,
    ]
    for page in pages:
        assert owner.secret_key.encode() not in page
        assert key.key_hash.encode() not in page
        assert key.display.encode() in page


def test_secret_value_is_never_rendered(admin_client, owner):
    secret = Secret.objects.get(workspace=owner.workspace, name="PAYMENT_KEY")
    for url in ("/admin/secrets_app/secret/", f"/admin/secrets_app/secret/{secret.pk}/change/"):
        page = admin_client.get(url).content
        assert SECRET_VALUE.encode() not in page
        assert bytes(secret.ciphertext) not in page


def test_admin_can_replace_a_secret_without_seeing_it(admin_client, owner):
    secret = Secret.objects.get(workspace=owner.workspace, name="PAYMENT_KEY")
    url = f"/admin/secrets_app/secret/{secret.pk}/change/"
    response = admin_client.post(url, {"value": "", "allowed_hosts_text": "api.pay.com"})
    assert response.status_code == 302
    secret.refresh_from_db()
    assert secret.allowed_hosts == ["api.pay.com"]
    assert services.secret_resolve(secret=secret) == SECRET_VALUE  # empty value keeps it
    admin_client.post(url, {"value": "rotated-value", "allowed_hosts_text": "api.pay.com"})
    secret.refresh_from_db()
    assert services.secret_resolve(secret=secret) == "rotated-value"


def test_revoke_action(admin_client, owner):
    key = ApiKey.objects.get(workspace=owner.workspace, kind="secret")
    response = admin_client.post(
        "/admin/secrets_app/apikey/",
        {"action": "revoke_keys", "_selected_action": [key.pk]},
    )
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.status() == "revoked"


def test_admin_login_is_by_email(client, db):
    User.objects.create_superuser(email="Boss@Example.com", password="pw-boss-123")
    assert client.login(username="boss@example.com", password="pw-boss-123")


def test_provider_credentials_are_listed_without_their_keys(admin_client, owner):
    from secrets_app.provider_credentials import provider_speech_set

    row = provider_speech_set(workspace=owner.workspace, kind="elevenlabs", api_key=SECRET_VALUE)
    for url in ("/admin/secrets_app/providercredential/",
                f"/admin/secrets_app/providercredential/{row.pk}/change/"):  # fmt: skip
        response = admin_client.get(url)
        assert response.status_code == 200 and SECRET_VALUE not in response.content.decode()
    listing = admin_client.get("/admin/secrets_app/providercredential/").content.decode()
    assert "elevenlabs" in listing


@pytest.mark.parametrize("model", ["agenttest", "testrun", "simulation"])
def test_evals_changelists_render(admin_client, model):
    assert admin_client.get(f"/admin/evals_app/{model}/").status_code == 200


def test_an_admin_save_publishes_like_any_other(admin_client, owner):
    from sessions_app.models import Agent

    agent = Agent.objects.get(workspace=owner.workspace, slug="orders")
    page = admin_client.get(f"/admin/sessions_app/agent/{agent.pk}/change/")
    assert page.status_code == 200 and agent.published_version.digest.encode() in page.content
    form = {
        "workspace": owner.workspace.pk, "name": "Orders", "slug": "orders",
        "instructions": "Changed in the admin.", "greeting": "", "voice": "", "mode": "voice",
        "llm_model": "", "stt_provider": "", "tts_provider": "", "tools": "[]",
        "versions-TOTAL_FORMS": "1", "versions-INITIAL_FORMS": "1",
        "versions-MIN_NUM_FORMS": "0", "versions-MAX_NUM_FORMS": "1000",
        "versions-0-id": agent.published_version_id, "versions-0-agent": agent.pk,
    }  # fmt: skip
    saved = admin_client.post(f"/admin/sessions_app/agent/{agent.pk}/change/", form)
    assert saved.status_code == 302, saved.content[:2000]
    agent.refresh_from_db()
    assert agent.published_version.number == 2
    assert agent.published_version.config["instructions"] == "Changed in the admin."
