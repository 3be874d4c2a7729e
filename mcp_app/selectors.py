"""Reads for MCP server connections: every one takes the workspace."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet
from django.http import Http404

from mcp_app.models import AgentMcpTool, McpServer
from secrets_app.models import Workspace


def mcp_server_list(*, workspace: Workspace) -> QuerySet[McpServer]:
    return McpServer.objects.filter(workspace=workspace)


def mcp_server_get(*, workspace: Workspace, uid: str) -> McpServer:
    try:
        key = uuid.UUID(str(uid))
    except ValueError:
        raise Http404 from None
    server = McpServer.objects.filter(workspace=workspace, uid=key).first()
    if server is None:
        raise Http404
    return server


def agent_mcp_tools(*, workspace: Workspace, agent_id: int) -> QuerySet[AgentMcpTool]:
    return AgentMcpTool.objects.filter(
        agent_id=agent_id, agent__workspace=workspace, server__workspace=workspace
    ).select_related("server")
