"""The playground page: a saved agent, the dashboard's own publishable key, client.js."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from realtime import access
from secrets_app import services as key_services
from secrets_app.models import ApiKey, User, Workspace
from sessions_app import services
from tests.concurrency import at_once
from tests.factories import Tenant, order_tool
from tests.frontend.dashboard.conftest import page
from tests.frontend.node import run_library_script

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


# ---------------------------------------------------------------- unverified accounts


def _unverified_owner_with_an_agent() -> tuple[Client, Workspace]:
    user = User.objects.create_user(email="fresh@example.com", password="x" * 12)
    workspace = key_services.workspace_create(name="Fresh", owner=user)
    services.agent_create(workspace=workspace, name="Chat", slug="chat", mode="text")
    client = Client()
    client.force_login(user)
    return client, workspace


def test_an_unverified_account_gets_no_playground_key(db: None) -> None:
    client, workspace = _unverified_owner_with_an_agent()
    url = reverse("dashboard:playground", args=[workspace.pk])
    html = client.get(url).content.decode()
    assert "Verify your email first" in html and "data-key=" not in html
    assert not ApiKey.objects.filter(workspace=workspace).exists()
    # Verified, the same person gets the key (the normal path beside it).
    User.objects.filter(email="fresh@example.com").update(email_verified_at=timezone.now())
    html = client.get(url).content.decode()
    [key] = ApiKey.objects.filter(workspace=workspace)
    assert f'data-key="{key.publishable_key}"' in html
    assert key.created_by is not None and key.created_by.email == "fresh@example.com"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_playground_visits_at_once_make_no_key_unverified_and_one_verified() -> None:
    _client, workspace = _unverified_owner_with_an_agent()
    url = reverse("dashboard:playground", args=[workspace.pk])
    user = User.objects.get(email="fresh@example.com")

    def visit(index: int) -> int:
        browser = Client()
        browser.force_login(user)
        return browser.get(url).status_code

    assert at_once(visit, 8) == [200] * 8
    assert not ApiKey.objects.filter(workspace=workspace).exists()
    User.objects.filter(pk=user.pk).update(email_verified_at=timezone.now())
    assert at_once(visit, 8) == [200] * 8
    assert ApiKey.objects.filter(workspace=workspace).count() == 1


def test_a_playground_key_made_before_for_an_unverified_account_stops_working(
    db: None,
) -> None:
    """Keys the old playground made without saying for whom are revoked by the migration
    (their workspace's verified people get a new one on their next visit)."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module(
        "secrets_app.migrations.0006_usage_scope_and_unverified_keys"
    )
    _, workspace = _unverified_owner_with_an_agent()
    _key, plaintext = key_services.api_key_create(
        workspace=workspace, kind=ApiKey.Kind.PUBLISHABLE, label="Dashboard playground",
        allowed_origins=[DASHBOARD_ORIGIN],
    )  # fmt: skip
    assert access.authorize_connection(key=plaintext, origin=DASHBOARD_ORIGIN, agent_slug="chat")
    migration.revoke_keys_of_unverified_accounts(apps, None)
    with pytest.raises(access.ConnectionRefused) as refused:
        access.authorize_connection(key=plaintext, origin=DASHBOARD_ORIGIN, agent_slug="chat")
    assert refused.value.code == "invalid_key"


def test_the_event_log_calls_a_barge_in_a_barge_in() -> None:
    """`cancelled {"reason":"cancel"}` is the user speaking over the agent, not a failure."""
    module = Path(__file__).resolve().parents[3] / "frontend/static/dashboard/event_labels.js"
    report = run_library_script(
        f'import {{ eventLabel }} from "{module.as_uri()}";\n'
        "console.log(JSON.stringify({\n"
        '  cancel: eventLabel({ type: "cancelled", reason: "cancel" }),\n'
        '  bargeIn: eventLabel({ type: "cancelled", reason: "barge_in" }),\n'
        '  reset: eventLabel({ type: "cancelled", reason: "reset" }),\n'
        '  chat: eventLabel({ type: "chat", text: "Hi" }),\n'
        "}));"
    )
    assert report["cancel"][0] == report["bargeIn"][0] == "barge-in"
    assert "spoke over the agent" in report["cancel"][1]
    assert report["reset"] == ["cancelled", "the conversation was reset"]
    assert report["chat"] == ["chat", ""]
