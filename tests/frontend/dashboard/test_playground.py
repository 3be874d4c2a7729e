"""The playground page: a saved agent, the dashboard's own publishable key, client.js."""

from __future__ import annotations

import pytest
from django.test import Client

from secrets_app.models import ApiKey
from sessions_app import access, services
from tests.factories import Tenant, order_tool
from tests.frontend.dashboard.conftest import page

DASHBOARD_ORIGIN = "http://testserver"


@pytest.fixture
def agents(owner: Tenant) -> None:
    services.agent_create(
        workspace=owner.workspace, name="Orders", slug="orders", tools=[order_tool()]
    )
    services.agent_create(workspace=owner.workspace, name="Weather", slug="weather", mode="text")


def playground_keys(tenant: Tenant) -> list[ApiKey]:
    return list(ApiKey.objects.filter(workspace=tenant.workspace, label="Dashboard playground"))


def test_playground_talks_with_a_key_made_for_the_dashboard(
    owner: Tenant, owner_client: Client, agents: None
) -> None:
    html = owner_client.get(page(owner, "playground") + "?agent=weather").content.decode()
    [key] = playground_keys(owner)
    assert f'data-key="{key.publishable_key}"' in html
    assert '<option value="weather" selected>' in html
    assert '<option value="text" selected>' in html  # the agent's own mode
    assert "dashboard/playground.js" in html
    owner_client.get(page(owner, "playground"))
    assert playground_keys(owner) == [key]  # reused, not one per visit
    assert key.allowed_origins == [DASHBOARD_ORIGIN] and not key.allow_inline_config


def test_the_playground_key_is_useless_elsewhere(
    owner: Tenant, owner_client: Client, agents: None
) -> None:
    owner_client.get(page(owner, "playground"))
    [key] = playground_keys(owner)
    granted = access.authorize_connection(
        key=key.publishable_key, origin=DASHBOARD_ORIGIN, agent_slug="orders"
    )
    assert granted.workspace == owner.workspace
    with pytest.raises(access.ConnectionRefused) as refused:
        access.authorize_connection(
            key=key.publishable_key, origin="https://evil.example", agent_slug="orders"
        )
    assert refused.value.code == "origin_not_allowed"


def test_a_revoked_playground_key_is_replaced(
    owner: Tenant, owner_client: Client, agents: None
) -> None:
    from secrets_app import services as key_services

    owner_client.get(page(owner, "playground"))
    [key] = playground_keys(owner)
    key_services.api_key_revoke(key=key)
    html = owner_client.get(page(owner, "playground")).content.decode()
    fresh = next(k for k in playground_keys(owner) if k.revoked_at is None)
    assert fresh.pk != key.pk and fresh.publishable_key in html


def test_without_agents_the_playground_points_to_the_agents(
    owner: Tenant, owner_client: Client
) -> None:
    html = owner_client.get(page(owner, "playground")).content.decode()
    assert "No agent to talk to yet" in html
    assert playground_keys(owner) == []


def test_a_member_can_use_the_playground(
    owner: Tenant, member_client: Client, agents: None
) -> None:
    assert member_client.get(page(owner, "playground")).status_code == 200


def test_the_outsider_sees_nothing(owner: Tenant, outsider_client: Client, agents: None) -> None:
    assert outsider_client.get(page(owner, "playground")).status_code == 404
    assert playground_keys(owner) == []


def test_the_playground_script_is_served(owner: Tenant, owner_client: Client) -> None:
    response = owner_client.get("/static/dashboard/playground.js")
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert response.status_code == 200 and b'from "/client.js"' in body
