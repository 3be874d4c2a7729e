"""Who may call the REST API: only an active secret key."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from secrets_app import services
from secrets_app.models import ApiKey
from tests.conftest import api_client


def _error(response) -> dict:
    return response.json()["error"]


@pytest.mark.parametrize(
    "header",
    [None, "Bearer", "Basic abc", "Bearer sk_doesnotexist", "Bearer " + "x" * 5000],
)
def test_missing_or_bad_credentials_get_401(owner, header):
    client = api_client(None)
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/keys")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert _error(response)["message"]


def test_publishable_key_is_refused_with_a_reason(owner):
    response = api_client(owner.publishable_key).get("/api/v1/keys")
    assert response.status_code == 401
    assert "publishable" in _error(response)["message"]


def test_revoked_key_gets_401(owner, owner_api):
    key_id = ApiKey.objects.get(workspace=owner.workspace, kind="secret").pk
    assert owner_api.post(f"/api/v1/keys/{key_id}/revoke").status_code == 200
    response = owner_api.get("/api/v1/keys")
    assert response.status_code == 401
    assert "revoked" in _error(response)["message"]


def test_rolled_key_stays_valid_until_its_expiry_then_401(owner, owner_api):
    key_id = ApiKey.objects.get(workspace=owner.workspace, kind="secret").pk
    until = timezone.now() + timedelta(hours=1)
    response = owner_api.post(
        f"/api/v1/keys/{key_id}/roll", {"expires_at": until.isoformat()}, format="json"
    )
    assert response.status_code == 201
    new_plaintext = response.json()["key"]
    assert new_plaintext.startswith("sk_") and new_plaintext != owner.secret_key
    assert response.json()["rolled_from"] == key_id
    assert owner_api.get("/api/v1/keys").status_code == 200  # old key, before expiry
    assert api_client(new_plaintext).get("/api/v1/keys").status_code == 200
    ApiKey.objects.filter(pk=key_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert owner_api.get("/api/v1/keys").status_code == 401
    assert api_client(new_plaintext).get("/api/v1/keys").status_code == 200


def test_roll_without_expiry_invalidates_old_key_at_once(owner, owner_api):
    key_id = ApiKey.objects.get(workspace=owner.workspace, kind="secret").pk
    new_plaintext = owner_api.post(f"/api/v1/keys/{key_id}/roll").json()["key"]
    assert owner_api.get("/api/v1/keys").status_code == 401
    assert api_client(new_plaintext).get("/api/v1/keys").status_code == 200


def test_secret_key_plaintext_is_shown_once(owner, owner_api):
    created = owner_api.post("/api/v1/keys", {"kind": "secret", "label": "ci"}, format="json")
    assert created.status_code == 201
    plaintext = created.json()["key"]
    assert created.json()["display"] == f"{plaintext[:7]}…{plaintext[-4:]}"
    listing = owner_api.get("/api/v1/keys").content.decode()
    detail = owner_api.get(f"/api/v1/keys/{created.json()['id']}").content.decode()
    assert plaintext not in listing and plaintext not in detail
    assert created.json()["publishable_key"] == ""


def test_publishable_key_settings(owner_api):
    response = owner_api.post(
        "/api/v1/keys",
        {
            "kind": "publishable",
            "allowed_origins": ["HTTPS://Shop.Example.com:443", "http://localhost:5173"],
            "allowed_agents": ["orders"],
            "allow_inline_config": False,
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["allowed_origins"] == ["https://shop.example.com", "http://localhost:5173"]
    assert body["allowed_agents"] == ["orders"]
    assert body["allow_inline_config"] is False
    assert body["publishable_key"] == body["key"]


def test_last_used_is_recorded(owner, owner_api):
    owner_api.get("/api/v1/keys")
    key = ApiKey.objects.get(workspace=owner.workspace, kind="secret")
    assert key.last_used_at is not None


def test_rolling_a_revoked_key_is_refused(owner, owner_api):
    key, _ = services.api_key_create(workspace=owner.workspace, kind="publishable")
    services.api_key_revoke(key=key)
    response = owner_api.post(f"/api/v1/keys/{key.pk}/roll")
    assert response.status_code == 400
    assert "active" in _error(response)["message"]
