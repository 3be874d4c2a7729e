from __future__ import annotations

from django.apps import AppConfig


class McpAppConfig(AppConfig):
    name = "mcp_app"
    verbose_name = "MCP servers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from mcp_app import session_tool

        # The engine names no app: the MCP kind registers itself.
        session_tool.register()
