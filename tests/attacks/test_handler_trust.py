"""Attack review: who a saved handler's secret access really comes from.

The README promises: "a member's save of a handler never grants it secret values". The
dashboard editor re-submits every tool on every save and re-stamps each handler with
the role of whoever pressed Save, so an owner who only fixes the greeting turns a
member's handler into one that reads secret values.
"""

from __future__ import annotations

import pytest

from sessions_app import selectors
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import logged_in, page
from tests.frontend.dashboard.test_agents import editor_post, server_tool, submitted

pytestmark = pytest.mark.django_db


@pytest.mark.xfail(
    strict=True,
    reason="ATTACK FINDING: an owner's save of unrelated fields re-stamps a member's handler "
    "with reads_secrets=True (frontend/dashboard/agents.py edit -> agent_tools_clean)",
)
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
