"""A workspace's connections to remote MCP servers, and the tools each agent may call.

A connection keeps the server's tool list as it was last read (``tools``: name,
description, input schema, and why a tool cannot be offered when its schema is unusable);
an agent is given tools by name (``AgentMcpTool``: an allowlist, never "all"), each with
its own timeout.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from secrets_app.audit import url_masked
from secrets_app.models import Workspace


class McpServer(models.Model):
    class Transport(models.TextChoices):
        STREAMABLE_HTTP = "streamable_http", "Streamable HTTP"
        SSE = "sse", "HTTP with SSE (older servers)"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="mcp_servers")
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=64)
    url = models.CharField(max_length=500)
    transport = models.CharField(
        max_length=16, choices=Transport.choices, default=Transport.STREAMABLE_HTTP
    )
    # [{"name": ..., "value": ...}]; a value names secrets as {{secret:NAME}}, never holds one.
    headers = models.JSONField(default=list, blank=True)
    # As last listed: [{"name", "description", "input_schema", "problem"}].
    tools = models.JSONField(default=list, blank=True)
    tools_refreshed_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="mcp_server_name")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def url_masked(self) -> str:
        """The URL as it is shown again after saving: query values (tokens) hidden."""
        return url_masked(self.url)


class AgentMcpTool(models.Model):
    """One tool of one server that one agent may call."""

    agent = models.ForeignKey(
        "sessions_app.Agent", on_delete=models.CASCADE, related_name="mcp_tools"
    )
    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="agent_tools")
    tool = models.CharField(max_length=128)
    timeout_ms = models.PositiveIntegerField(null=True, blank=True)  # None: MCP_TOOL_TIMEOUT_S

    class Meta:
        ordering = ["server__name", "tool", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "server", "tool"], name="agent_mcp_tool")
        ]

    def __str__(self) -> str:
        return f"{self.server.name}/{self.tool}"
