"""MCP tools in a realtime session: the ``mcp`` tool kind.

``configure`` gives a session the tools its agent was allowed (``AgentMcpTool``: by name,
never "all"), each a ``ToolDefinition`` of kind ``mcp`` whose ``source`` names its server
connection and its name there, with the schema checked when the list was refreshed and
the agent's timeout for it. ``McpTools``, the kind's ``ToolRunner`` (registered from this
app's ``ready()``), calls it during the turn through the egress guard
(``mcp_app.connection``): the result is scrubbed of every secret of the workspace and cut
to the sandbox's result cap; a server that is down, slow or refusing makes the call fail
with a sentence the LLM can say, never the turn.
"""

from __future__ import annotations

import json
import logging

from channels.db import database_sync_to_async
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import close_old_connections

from egress.secret_refs import SecretBinding
from engine.session.config import SessionConfig, ToolDefinition
from engine.tools import kinds
from engine.tools.call import ToolRequest, ToolResult, ToolStatus
from engine.tools.runner import ToolRunner
from mcp_app import connection, selectors, services
from mcp_app.models import McpServer
from sessions_app.models import Agent
from tools_app.services import scrub, secret_bindings

logger = logging.getLogger(__name__)

KIND = "mcp"


def configure(config: SessionConfig, *, agent: Agent) -> None:
    """Add the agent's allowed MCP tools (a name the session already has is kept as is)."""
    taken = {tool.name for tool in config.tools}
    for allowed in selectors.agent_mcp_tools(workspace=agent.workspace, agent_id=agent.pk):
        listed = next((t for t in allowed.server.tools if t["name"] == allowed.tool), None)
        if listed is None or listed.get("problem") or allowed.tool in taken:
            continue  # gone from the server's list since it was allowed
        timeout_ms = allowed.timeout_ms or settings.MCP_TOOL_TIMEOUT_S * 1000
        config.tools.append(
            ToolDefinition(
                name=allowed.tool,
                description=listed.get("description", ""),
                parameters=listed["input_schema"],
                timeout_s=min(timeout_ms / 1000, settings.MCP_TOOL_MAX_TIMEOUT_S),
                kind=KIND,
                source=f"{allowed.server.uid}/{allowed.tool}",
            )
        )
        taken.add(allowed.tool)


class McpTools(ToolRunner):
    """The ``mcp`` kind: one call, one MCP session with the tool's server."""

    kind = KIND
    # The server may have acted on the call: an interrupted turn keeps its result.
    shielded = True

    async def run(self, request: ToolRequest) -> ToolResult:
        server_uid, _, tool = request.source.partition("/")
        loaded = await database_sync_to_async(_load, thread_sensitive=False)(
            request.workspace_id, server_uid
        )
        if loaded is None:
            return ToolResult(ToolStatus.FAILED, error="this tool's server connection was removed")
        server, bindings = loaded
        arguments = scrub(json.dumps(request.arguments, ensure_ascii=False), bindings)
        try:
            access = services.server_access(server, bindings)
            result = await connection.tool_call(
                access, tool, request.arguments, timeout_s=request.timeout_s
            )
        except connection.McpUnavailable as exc:
            logger.info("an MCP tool call failed: %s", type(exc).__name__)
            status = (
                ToolStatus.TIMED_OUT
                if isinstance(exc, connection.McpTimedOut)
                else ToolStatus.FAILED
            )
            return ToolResult(status, error=scrub(str(exc), bindings), masked_arguments=arguments)
        if result.isError:
            error = _capped(scrub(connection.error_text(result), bindings) or "")
            return ToolResult(ToolStatus.FAILED, error=error, masked_arguments=arguments)
        text = _capped(scrub(connection.result_text(result), bindings) or "")
        return ToolResult(ToolStatus.COMPLETED, result=text, masked_arguments=arguments)


def _load(workspace_id: int, server_uid: str) -> tuple[McpServer, list[SecretBinding]] | None:
    close_old_connections()
    try:
        server = McpServer.objects.filter(workspace_id=workspace_id, uid=server_uid).first()
        return None if server is None else (server, secret_bindings(workspace_id=workspace_id))
    except ValidationError:  # not a UUID
        return None
    finally:
        close_old_connections()


def _capped(text: str) -> str:
    """At most the sandbox's result cap, as the sandbox says it (valid JSON either way)."""
    limit = settings.SANDBOX_MAX_RESULT_BYTES
    encoded = text.encode()
    if len(encoded) <= limit:
        return text
    preview = encoded[: limit // 2].decode("utf-8", "ignore")
    return json.dumps(
        {
            "truncated": True,
            "error": f"the result is larger than {limit} bytes",
            "preview": preview,
        },
        ensure_ascii=False,
    )


def register() -> None:
    """Make ``mcp`` a tool kind every session builds (from ``apps.ready``)."""
    kinds.register(KIND, lambda tools: McpTools())
