"""Secrets through the API: write-only values, metadata only on the way out."""

from __future__ import annotations

from secrets_app import services
from secrets_app.models import Secret


def test_create_replace_delete_never_returns_the_value(owner, owner_api):
    created = owner_api.post(
        "/api/v1/secrets",
        {"name": "WEATHER_KEY", "value": "w-123-secret", "allowed_hosts": ["API.Weather.com"]},
        format="json",
    )
    assert created.status_code == 201
    assert created.json() == {
        "name": "WEATHER_KEY",
        "allowed_hosts": ["api.weather.com"],
        "readable_by_code": False,
        "created_at": created.json()["created_at"],
        "updated_at": created.json()["updated_at"],
    }
    replaced = owner_api.put(
        "/api/v1/secrets/WEATHER_KEY", {"value": "w-456-secret"}, format="json"
    )
    assert replaced.status_code == 200
    for response in (
        created,
        replaced,
        owner_api.get("/api/v1/secrets"),
        owner_api.get("/api/v1/secrets/WEATHER_KEY"),
    ):
        assert b"secret" not in response.content.replace(b"WEATHER_KEY", b"")
    secret = Secret.objects.get(workspace=owner.workspace, name="WEATHER_KEY")
    assert services.secret_resolve(secret=secret) == "w-456-secret"
    assert owner_api.delete("/api/v1/secrets/WEATHER_KEY").status_code == 204
    assert owner_api.get("/api/v1/secrets/WEATHER_KEY").status_code == 404


def test_patch_changes_hosts_only(owner, owner_api):
    owner_api.post("/api/v1/secrets", {"name": "K", "value": "v1"}, format="json")
    response = owner_api.patch(
        "/api/v1/secrets/K", {"allowed_hosts": ["*.example.com"]}, format="json"
    )
    assert response.json()["allowed_hosts"] == ["*.example.com"]
    secret = Secret.objects.get(workspace=owner.workspace, name="K")
    assert services.secret_resolve(secret=secret) == "v1"


def test_value_size_limit_is_exact(owner_api):
    ok = owner_api.post("/api/v1/secrets", {"name": "BIG", "value": "x" * 65536}, format="json")
    assert ok.status_code == 201
    too_big = owner_api.post(
        "/api/v1/secrets", {"name": "BIG", "value": "x" * 65537}, format="json"
    )
    assert too_big.status_code == 400


def test_a_workspace_holds_a_bounded_number_of_secrets(owner, owner_api, settings):
    settings.SECRETS_PER_WORKSPACE_MAX = 2
    for name in ("ONE", "TWO"):
        body = {"name": name, "value": "v-1234"}
        assert owner_api.post("/api/v1/secrets", body, format="json").status_code == 201
    third = owner_api.post("/api/v1/secrets", {"name": "THREE", "value": "v"}, format="json")
    assert third.status_code == 400 and "at most 2 secrets" in third.json()["error"]["message"]
    replaced = owner_api.put("/api/v1/secrets/TWO", {"value": "v-5678"}, format="json")
    assert replaced.status_code == 200  # replacing one is not adding one
