"""Every keys/secrets/agents endpoint: the outsider sees nothing of the owner's."""

from __future__ import annotations

import pytest

from secrets_app import services
from secrets_app.models import ApiKey
from sessions_app import services as agent_services
from tests.conftest import api_client
from tests.factories import Tenant, order_tool


@pytest.fixture
def owned(owner: Tenant) -> dict[str, object]:
    key, _ = services.api_key_create(workspace=owner.workspace, kind=ApiKey.Kind.SECRET)
    services.secret_set(
        workspace=owner.workspace, name="STRIPE_KEY", value="sk_live_x", allowed_hosts=[]
    )
    agent_services.agent_create(
        workspace=owner.workspace, name="Orders", slug="orders", tools=[order_tool()]
    )
    return {"key_id": key.pk}


def _owner_object_requests(key_id: int) -> list[tuple[str, str, dict[str, object] | None]]:
    return [
        ("get", f"/api/v1/keys/{key_id}", None),
        ("patch", f"/api/v1/keys/{key_id}", {"label": "mine now"}),
        ("post", f"/api/v1/keys/{key_id}/roll", {}),
        ("post", f"/api/v1/keys/{key_id}/revoke", {}),
        ("get", "/api/v1/secrets/STRIPE_KEY", None),
        ("patch", "/api/v1/secrets/STRIPE_KEY", {"allowed_hosts": ["evil.example"]}),
        ("delete", "/api/v1/secrets/STRIPE_KEY", None),
        ("get", "/api/v1/agents/orders", None),
        ("patch", "/api/v1/agents/orders", {"instructions": "leak"}),
        ("put", "/api/v1/agents/orders", {"name": "x", "slug": "orders"}),
        ("delete", "/api/v1/agents/orders", None),
    ]


def test_outsider_gets_404_on_every_owner_object(owner, outsider, outsider_api, owned):
    for method, url, body in _owner_object_requests(owned["key_id"]):
        response = getattr(outsider_api, method)(url, body, format="json")
        assert response.status_code == 404, (method, url, response.content)
    # and nothing changed for the owner
    owner_api = api_client(owner.secret_key)
    assert owner_api.get(f"/api/v1/keys/{owned['key_id']}").json()["status"] == "active"
    assert owner_api.get("/api/v1/secrets/STRIPE_KEY").json()["allowed_hosts"] == []
    assert owner_api.get("/api/v1/agents/orders").json()["instructions"] == ""


def test_outsider_lists_only_their_own(owner, outsider, outsider_api, owned):
    keys = outsider_api.get("/api/v1/keys").json()
    assert {k["id"] for k in keys}.isdisjoint(
        set(ApiKey.objects.filter(workspace=owner.workspace).values_list("pk", flat=True))
    )
    assert len(keys) == 2  # the outsider's own pk_ and sk_
    assert outsider_api.get("/api/v1/secrets").json() == []
    assert outsider_api.get("/api/v1/agents").json() == []


def test_outsider_cannot_shadow_owner_secret_by_name(owner, outsider_api, owned):
    response = outsider_api.put("/api/v1/secrets/STRIPE_KEY", {"value": "attacker"}, format="json")
    assert response.status_code == 201  # their own, separate secret
    from secrets_app.models import Secret

    owner_secret = Secret.objects.get(workspace=owner.workspace, name="STRIPE_KEY")
    assert services.secret_resolve(secret=owner_secret) == "sk_live_x"


def test_member_of_workspace_shares_its_objects(member, owner, owned):
    # Membership is what the dashboard uses; keys belong to the workspace, not the user.
    from secrets_app import selectors

    workspaces = list(selectors.workspace_list_for_user(user=member.user))
    assert workspaces == [owner.workspace]
    assert selectors.membership_get(user=member.user, workspace=owner.workspace).role == "member"
