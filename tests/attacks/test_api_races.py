"""Attacks on the REST API by sending the same request many times at the same instant, now
regressions. Before: on PostgreSQL, eight `POST /mcp-servers` with one name answered five
500s (the name's unique constraint, checked before and raced past), eight `POST
/phone-numbers` with one number three 500s, eight `PUT /agents/{slug}/mcp-tools` seven
500s (each deleted the list, then all inserted the same rows); a workspace limited to 3
secrets held 6 or 9, to 2 MCP servers 3, and the webhook endpoint and agent test limits
were counted the same way.

Now each of them counts and writes under a lock (the workspace's row, or the agent's for its
tool list): one request at a time, every answer a 201/200 or a 400 naming the limit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from evals_app.models import AgentTest
from mcp_app.models import AgentMcpTool, McpServer
from secrets_app.models import Secret, Workspace
from sessions_app import services as agent_services
from telephony_app.models import PhoneNumber
from tests.concurrency import at_once
from tests.conftest import api_client
from tests.factories import Tenant, phone_line
from webhooks_app import services as webhooks
from webhooks_app.models import WebhookEndpoint

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

AT_ONCE = 8


@pytest.fixture(autouse=True)
def _unthrottled(settings: Any) -> None:
    settings.API_REQUESTS_PER_MINUTE = 100_000


def _at_once(key: str, method: str, path: str, body: Callable[[int], Any]) -> list[Any]:
    """The same request sent ``AT_ONCE`` times together; the answers, a 500 kept as one."""

    def send(index: int) -> Any:
        client = api_client(key)
        client.raise_request_exception = False
        return getattr(client, method)(path, body(index), format="json")

    return at_once(send, AT_ONCE)


def _statuses(answers: list[Any]) -> Counter[int]:
    return Counter(answer.status_code for answer in answers)


def _messages(answers: list[Any]) -> set[str]:
    return {a.json()["error"]["message"] for a in answers if a.status_code == 400}


def test_one_mcp_server_name_sent_at_once_makes_one_server(owner: Tenant, settings: Any) -> None:
    settings.MCP_WORKSPACE_MAX_SERVERS = 20
    body = {"name": "Tickets", "url": "https://mcp.invalid/mcp"}
    answers = _at_once(owner.secret_key, "post", "/api/v1/mcp-servers", lambda i: body)
    assert _statuses(answers) == {201: 1, 400: AT_ONCE - 1}
    assert _messages(answers) == {"name: This workspace has an MCP server of that name."}
    assert McpServer.objects.filter(workspace=owner.workspace).count() == 1


def test_the_mcp_server_limit_holds_at_once(owner: Tenant, settings: Any) -> None:
    settings.MCP_WORKSPACE_MAX_SERVERS = 2
    answers = _at_once(
        owner.secret_key, "post", "/api/v1/mcp-servers",
        lambda i: {"name": f"Server {i}", "url": "https://mcp.invalid/mcp"},
    )  # fmt: skip
    assert _statuses(answers) == {201: 2, 400: AT_ONCE - 2}
    assert McpServer.objects.filter(workspace=owner.workspace).count() == 2


def test_one_phone_number_sent_at_once_is_added_once(owner: Tenant) -> None:
    phone_line(owner.workspace, _agent(owner), number="+14155550100")
    body = {"account": "Main Twilio", "number": "+14155550123", "agent": "support"}
    answers = _at_once(owner.secret_key, "post", "/api/v1/phone-numbers", lambda i: body)
    assert _statuses(answers) == {201: 1, 400: AT_ONCE - 1}
    assert _messages(answers) == {"number: the workspace has this number already"}
    assert PhoneNumber.objects.filter(workspace=owner.workspace).count() == 2


def test_an_agents_mcp_tools_set_at_once_end_as_one_list(owner: Tenant) -> None:
    slug = _agent(owner)
    servers = [
        McpServer.objects.create(
            workspace=owner.workspace,
            name=f"srv{n}",
            url="https://mcp.example.com/mcp",
            tools=[{"name": f"lookup{n}", "description": "Looks up", "input_schema": {}}],
        )
        for n in range(2)
    ]

    def chosen(index: int) -> dict[str, Any]:
        server = servers[index % 2]
        return {"tools": [{"server": str(server.uid), "tool": server.tools[0]["name"]}]}

    answers = _at_once(owner.secret_key, "put", f"/api/v1/agents/{slug}/mcp-tools", chosen)
    assert _statuses(answers) == {200: AT_ONCE}
    assert AgentMcpTool.objects.filter(agent__slug=slug).count() == 1


def test_the_secret_limit_holds_at_once(owner: Tenant, settings: Any) -> None:
    settings.SECRETS_PER_WORKSPACE_MAX = 3
    answers = _at_once(
        owner.secret_key, "post", "/api/v1/secrets", lambda i: {"name": f"KEY_{i}", "value": "v"}
    )
    assert _statuses(answers) == {201: 3, 400: AT_ONCE - 3}
    assert Secret.objects.filter(workspace=owner.workspace).count() == 3


def test_the_agent_test_limit_holds_at_once(owner: Tenant, settings: Any) -> None:
    settings.AGENT_TESTS_MAX = 2
    slug = _agent(owner)
    answers = _at_once(
        owner.secret_key, "post", f"/api/v1/agents/{slug}/tests",
        lambda i: {"name": f"test {i}", "turns": [{"user": "Hello"}]},
    )  # fmt: skip
    assert _statuses(answers) == {201: 2, 400: AT_ONCE - 2}
    assert AgentTest.objects.filter(agent__slug=slug).count() == 2


def test_the_webhook_endpoint_limit_holds_at_once(owner: Tenant, monkeypatch: Any) -> None:
    monkeypatch.setattr(webhooks, "ENDPOINTS_MAX", 2)
    workspace_id = owner.workspace.pk

    def create(index: int) -> str:
        workspace = Workspace.objects.get(pk=workspace_id)
        try:
            webhooks.endpoint_create(
                workspace=workspace, url=f"https://hooks.example.com/{index}",
                events=["session.ended"],
            )  # fmt: skip
        except ValidationError as refused:
            return refused.messages[0]
        return "made"

    assert Counter(at_once(create, AT_ONCE))["made"] == 2
    assert WebhookEndpoint.objects.filter(workspace=owner.workspace).count() == 2


def _agent(owner: Tenant) -> str:
    agent_services.agent_create(workspace=owner.workspace, name="Support", slug="support")
    return "support"
