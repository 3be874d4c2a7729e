from __future__ import annotations

from django.urls import path

from mcp_app import api

SERVER = "mcp-servers/<str:server_id>"

urlpatterns = [
    path("mcp-servers", api.McpServerListApi.as_view(), name="mcp-servers"),
    path(SERVER, api.McpServerDetailApi.as_view(), name="mcp-server"),
    path(f"{SERVER}/refresh", api.McpServerRefreshApi.as_view(), name="mcp-server-refresh"),
    path("agents/<slug:slug>/mcp-tools", api.AgentMcpToolsApi.as_view(), name="agent-mcp-tools"),
]
