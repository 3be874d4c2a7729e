"""A saved agent's server handlers must parse: the API and the service refuse broken ones."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from sessions_app import selectors, services
from sessions_app.models import Agent
from tests.factories import order_tool

BROKEN = "async (args, ctx) => {\n  const order = ;\n  return order;\n}"


def test_the_api_refuses_a_handler_with_a_syntax_error(owner, owner_api):
    body = {"name": "A", "slug": "a", "tools": [order_tool(), order_tool(name="b", handler=BROKEN)]}
    response = owner_api.post("/api/v1/agents", body, format="json")
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "tools[1].handler" in message and "SyntaxError" in message and "(line 2)" in message
    assert not Agent.objects.filter(workspace=owner.workspace).exists()


def test_an_update_with_a_broken_handler_changes_nothing(owner, owner_api):
    services.agent_create(workspace=owner.workspace, name="A", slug="a", tools=[order_tool()])
    response = owner_api.patch(
        "/api/v1/agents/a",
        {"greeting": "Hi", "tools": [order_tool(handler="42")]},
        format="json",
    )
    assert response.status_code == 400
    assert "single function expression" in response.json()["error"]["message"]
    agent = selectors.agent_get(workspace=owner.workspace, slug="a")
    assert agent.greeting == "" and agent.tools[0]["handler"] == order_tool()["handler"]


def test_client_tools_have_no_handler_to_check():
    tools = [{"name": "open_file", "client": True}, order_tool()]
    assert [tool["name"] for tool in services.agent_tools_clean(tools)] == [
        "open_file",
        "track_order",
    ]
    with pytest.raises(ValidationError, match=r"tools\[0\]\.handler: SyntaxError"):
        services.agent_tools_clean([order_tool(handler=BROKEN)])


def test_the_outsider_cannot_save_into_anothers_agent(owner, outsider_api):
    services.agent_create(workspace=owner.workspace, name="A", slug="a", tools=[order_tool()])
    response = outsider_api.patch(
        "/api/v1/agents/a", {"tools": [order_tool(handler=BROKEN)]}, format="json"
    )
    assert response.status_code == 404
    agent = selectors.agent_get(workspace=owner.workspace, slug="a")
    assert agent.tools[0]["handler"] == order_tool()["handler"]
