"""REST API: requests per key (429 with Retry-After), key scopes, keys that made keys, the
safer defaults of new keys, and the audit log. The outsider sees nothing."""

from __future__ import annotations

from typing import Any

import pytest

from secrets_app import scopes
from secrets_app.models import ApiKey, AuditEvent
from tests.conftest import api_client
from tests.factories import Tenant


def test_requests_per_key_are_limited_with_retry_after(
    owner_api: Any, outsider_api: Any, settings: Any
) -> None:
    settings.API_REQUESTS_PER_MINUTE = 5
    answers = [owner_api.get("/api/v1/secrets").status_code for _ in range(8)]
    assert answers == [200] * 5 + [429] * 3
    refused = owner_api.get("/api/v1/agents")
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["error"]["code"] == "throttled"
    assert outsider_api.get("/api/v1/secrets").status_code == 200  # its own budget


def test_guessing_keys_from_one_address_is_refused(db: None, settings: Any) -> None:
    settings.API_REQUESTS_PER_MINUTE = 3
    guesser = api_client("sk_guess")
    answers = [guesser.get("/api/v1/secrets").status_code for _ in range(5)]
    assert answers == [401, 401, 401, 429, 429]


def _key(api: Any, **body: Any) -> Any:
    return api.post("/api/v1/keys", {"kind": "secret", **body}, format="json")


def test_a_key_without_the_keys_scope_cannot_make_keys(owner: Tenant, owner_api: Any) -> None:
    made = _key(owner_api, label="ci")
    assert made.status_code == 201
    assert made.json()["scopes"] == scopes.DEFAULT and "keys" not in made.json()["scopes"]
    ci = api_client(made.json()["key"])
    refused = _key(ci)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "missing_scope"
    assert ci.post(f"/api/v1/keys/{made.json()['id']}/roll", {}, format="json").status_code == 403
    assert ci.get("/api/v1/agents").status_code == 200


def test_a_key_grants_only_scopes_it_has(owner: Tenant, owner_api: Any) -> None:
    limited = api_client(_key(owner_api, scopes=["keys", "agents"]).json()["key"])
    refused = _key(limited, scopes=["secrets"])
    assert refused.status_code == 400 and "only grant scopes it has" in refused.text
    assert _key(limited, scopes=["agents"]).status_code == 201


def test_keys_record_who_made_them_and_revoking_a_key_revokes_its_offspring(
    owner: Tenant, owner_api: Any
) -> None:
    parent = _key(owner_api, scopes=["keys", "secrets"]).json()
    child = _key(api_client(parent["key"]), scopes=["secrets"]).json()
    assert child["created_by_key"] == parent["display"]
    owner_api.post(f"/api/v1/keys/{parent['id']}/revoke", format="json")
    assert ApiKey.objects.get(pk=child["id"]).status() == "revoked"
    assert api_client(child["key"]).get("/api/v1/secrets").status_code == 401


def test_new_publishable_keys_take_no_inline_config_or_code(owner_api: Any) -> None:
    body = owner_api.post("/api/v1/keys", {"kind": "publishable"}, format="json").json()
    assert body["allow_inline_config"] is False and body["allow_inline_tool_code"] is False
    changed = owner_api.patch(
        f"/api/v1/keys/{body['id']}", {"allow_inline_tool_code": True, "tokens_only": True},
        format="json",
    ).json()  # fmt: skip
    assert changed["allow_inline_tool_code"] is True and changed["tokens_only"] is True


def test_changes_through_the_api_are_audited(owner: Tenant, owner_api: Any) -> None:
    owner_api.post(
        "/api/v1/secrets", {"name": "SHOP_KEY", "value": "s3cr3t-v4lue", "allowed_hosts": []},
        format="json", REMOTE_ADDR="192.0.2.44",
    )  # fmt: skip
    event = AuditEvent.objects.get(workspace=owner.workspace, action="secret.created")
    assert event.actor_key is not None and event.actor_key.kind == "secret"
    assert event.address == "192.0.2.44" and event.target == "SHOP_KEY"
    listed = owner_api.get("/api/v1/audit-events").json()["results"]
    assert listed[0]["action"] == "secret.created"
    assert "s3cr3t-v4lue" not in str(listed)


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "/api/v1/audit-events"), ("get", "/api/v1/keys"), ("get", "/api/v1/secrets")],
)
def test_the_outsider_sees_nothing(
    owner: Tenant, owner_api: Any, outsider_api: Any, method: str, path: str
) -> None:
    owner_api.post("/api/v1/secrets", {"name": "SHOP_KEY", "value": "v"}, format="json")
    body = getattr(outsider_api, method)(path).json()
    assert "SHOP_KEY" not in str(body) and "owner@example.com" not in str(body)
