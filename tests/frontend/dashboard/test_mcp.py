"""The MCP servers page: a server connected and its tools shown, an agent given one of
them; members only read; the outsider sees nothing."""

from __future__ import annotations

import pytest
from django.test import Client

from mcp_app.models import AgentMcpTool, McpServer
from sessions_app import services as agent_services
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import page
from tests.mcp_app import conftest as mcp_fixtures
from tests.mcp_app.conftest import HOST
from tests.mcp_app.mcp_server import McpTestServer

# The MCP tests' fixtures: a real MCP server on loopback, the override on for these tests.
mcp_server = mcp_fixtures.mcp_server
server = mcp_fixtures.server
loopback_allowed = mcp_fixtures.loopback_allowed

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("loopback_allowed")]


def test_connect_list_and_allow_a_tool(
    owner: Tenant, owner_client: Client, server: McpTestServer
) -> None:
    url = f"http://{HOST}:{server.port}/mcp"
    response = owner_client.post(
        page(owner, "mcp"), {"name": "crm", "url": url, "transport": "streamable_http"}
    )
    assert response.status_code == 302
    shown = owner_client.get(page(owner, "mcp")).content.decode()
    assert "crm" in shown and "delete_everything" in shown and "Refresh tools" in shown
    connection = McpServer.objects.get(workspace=owner.workspace)
    agent = agent_services.agent_create(workspace=owner.workspace, name="Desk", slug="desk")
    response = owner_client.post(
        page(owner, "agent-mcp", "desk"), {"tools": [f"{connection.uid}/echo"]}
    )
    assert response.status_code == 302
    assert [t.tool for t in AgentMcpTool.objects.filter(agent=agent)] == ["echo"]


def test_a_credential_header_must_be_a_secret(owner: Tenant, owner_client: Client) -> None:
    response = owner_client.post(
        page(owner, "mcp"),
        {"name": "crm", "url": "https://mcp.example.com/mcp", "transport": "streamable_http",
         "header_name": "Authorization", "header_value": "Bearer abc123"},
    )  # fmt: skip
    assert response.status_code == 200
    assert "store it as a secret" in response.content.decode()
    assert not McpServer.objects.exists()


def test_members_read_and_the_outsider_sees_nothing(
    owner: Tenant, member_client: Client, outsider_client: Client, server: McpTestServer
) -> None:
    from mcp_app import services

    connection = services.mcp_server_create(
        workspace=owner.workspace, name="crm", url=f"http://{HOST}:{server.port}/mcp"
    )
    assert "crm" in member_client.get(page(owner, "mcp")).content.decode()
    refresh = page(owner, "mcp-server", connection.uid, "delete")
    assert member_client.post(refresh).status_code == 403
    assert outsider_client.get(page(owner, "mcp")).status_code in (403, 404)
    assert outsider_client.post(refresh).status_code in (403, 404)
    assert McpServer.objects.filter(pk=connection.pk).exists()
