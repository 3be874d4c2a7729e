"""An attack found by a review, now a regression: who a saved handler's secret access
comes from. The dashboard editor re-submits every tool on every save; an owner who only
fixes the greeting must not turn a member's unchanged handler into one that reads secret
values (a handler keeps the right of whoever last wrote it)."""

from __future__ import annotations

import pytest

from sessions_app import selectors
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import logged_in, page
from tests.frontend.dashboard.test_agents import editor_post, server_tool, submitted

pytestmark = pytest.mark.django_db


def test_an_owner_saving_the_greeting_does_not_bless_a_members_handler(
    owner: Tenant, member: Tenant
) -> None:
    member_client = logged_in(member)
    # The member saves a handler: it must never see secret values.
    response = member_client.post(
        page(member, "agent-new"), editor_post(name="Weather", tools=[server_tool()])
    )
    assert response.status_code == 302
    agent = selectors.agent_get(workspace=owner.workspace, slug="weather")
    assert agent.tools[0]["reads_secrets"] is False

    # The owner opens the same agent and changes only the greeting.
    owner_client = logged_in(owner)
    form = submitted(owner_client.get(page(owner, "agent-edit", "weather")).content.decode())
    assert form["tools-0-handler"] == server_tool()["handler"]  # untouched
    form["greeting"] = "Hello!"
    assert owner_client.post(page(owner, "agent-edit", "weather"), form).status_code == 302

    agent = selectors.agent_get(workspace=owner.workspace, slug="weather")
    assert agent.greeting == "Hello!"
    # The member's unchanged handler must not have gained access to secret values.
    assert agent.tools[0]["reads_secrets"] is False
