"""The Versions and Tests pages of an agent: publish the draft, see what changed, publish an
older version again, split traffic; write a test, run it (no LLM: the run says so), start a
simulation; the outsider sees nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from evals_app.models import AgentTest, Simulation, TestRun
from sessions_app import services as agent_services
from sessions_app.models import Agent
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import page

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shop(owner: Tenant) -> Agent:
    return agent_services.agent_create(
        workspace=owner.workspace, name="Shop", slug="shop", greeting="Hello.", drafts=True
    )


def test_publish_compare_roll_back_and_split(
    owner: Tenant, owner_client: Client, shop: Agent
) -> None:
    versions_page = page(owner, "agent-versions", "shop")
    assert "Not published yet" in owner_client.get(versions_page).content.decode()
    owner_client.post(page(owner, "agent-version-do", "shop", "publish"), {"note": "first"})
    agent_services.agent_update(agent=shop, greeting="Welcome back.")
    owner_client.post(page(owner, "agent-version-do", "shop", "publish"), {"note": "warmer"})
    shop.refresh_from_db()
    assert shop.published_version is not None and shop.published_version.number == 2

    compared = owner_client.get(versions_page, {"from": "1", "to": "2"}).content.decode()
    assert "-Hello." in compared and "+Welcome back." in compared

    owner_client.post(page(owner, "agent-version-do", "shop", "rollback"), {"version": "1"})
    owner_client.post(
        page(owner, "agent-version-do", "shop", "split"), {"version": "2", "percent": "25"}
    )
    shop.refresh_from_db()
    assert (shop.published_version.number, shop.split_percent) == (1, 25)
    listed = owner_client.get(versions_page).content.decode()
    assert "25 % of new sessions" in listed


def test_a_required_test_blocks_publish_on_the_page(
    owner: Tenant, owner_client: Client, shop: Agent, settings: Any
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.LLM_BASE_URL = ""
    owner_client.post(
        page(owner, "agent-version-do", "shop", "settings"), {"drafts": "on", "require_tests": "on"}
    )
    turns = json.dumps([{"user": "Hi", "reply_contains": "hello"}])
    owner_client.post(
        page(owner, "agent-test-do", "shop", "save"), {"name": "greets", "turns": turns}
    )
    assert AgentTest.objects.get(agent=shop).turns == [{"user": "Hi", "reply_contains": "hello"}]
    owner_client.post(page(owner, "agent-test-do", "shop", "run"))
    assert TestRun.objects.get(agent=shop).status == "error"
    tests_page = owner_client.get(page(owner, "agent-tests", "shop")).content.decode()
    assert "No language model is configured for this workspace" in tests_page

    refused = owner_client.post(
        page(owner, "agent-version-do", "shop", "publish"), follow=True
    ).content.decode()
    assert "the draft&#x27;s tests have not passed" in refused
    shop.refresh_from_db()
    assert shop.published_version is None

    owner_client.post(page(owner, "agent-test-do", "shop", "simulate"), {
        "persona": "A tourist", "goal": "Find the museum", "criteria": "Gives directions",
        "max_turns": "3", "count": "2",
    })  # fmt: skip
    assert Simulation.objects.filter(agent=shop).count() == 2


def test_the_outsider_sees_nothing(
    owner: Tenant, outsider: Tenant, outsider_client: Client, shop: Agent
) -> None:
    for name in ("agent-versions", "agent-tests"):
        assert outsider_client.get(page(owner, name, "shop")).status_code == 404
    assert outsider_client.get(page(outsider, "agent-versions", "shop")).status_code == 404
    published = outsider_client.post(page(outsider, "agent-version-do", "shop", "publish"))
    assert published.status_code == 404
    assert not shop.versions.exists()
