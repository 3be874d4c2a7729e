"""Writes for MCP server connections: create, list their tools again, delete, and which
tools an agent may call. Every change is in the audit log."""

from __future__ import annotations

import logging
import re
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from django.utils import timezone

import egress
from core import outbound
from core.storable import storable, strings_mapped
from egress.client import host_allowed
from egress.secret_refs import SecretBinding
from engine.tools.schema import SchemaError, to_json_schema
from mcp_app import connection
from mcp_app.models import AgentMcpTool, McpServer
from secrets_app.audit import SYSTEM, Actor, audit_record, url_shown
from secrets_app.models import Secret, Workspace
from secrets_app.services import workspace_lock
from sessions_app.models import Agent
from tools_app.services import scrub, secret_bindings

logger = logging.getLogger(__name__)

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}\Z")
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}\Z")
HEADER_VALUE = re.compile(r"^[\t\x20-\x7e]{0,2000}\Z")  # ASCII, no CR/LF
SECRET_PLACEHOLDER = re.compile(r"\{\{\s*secret:([A-Za-z0-9_]+)\s*\}\}")
# Framing is the client's; credentials only ever from the secret store.
MANAGED_HEADERS = frozenset(
    "host content-length transfer-encoding connection upgrade te accept content-type "
    "mcp-session-id mcp-protocol-version last-event-id".split()
)
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key"})
MAX_HEADERS = 10
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")  # what LLM function calling accepts
DESCRIPTION_MAX = 1024
UNSTORABLE_LIST = "The tool server's list could not be stored; refresh it, or ask its owner."
AGENT_MAX_TOOLS = 32


# --- connections ----------------------------------------------------------------------


def mcp_server_create(
    *,
    workspace: Workspace,
    name: str,
    url: str,
    transport: str = McpServer.Transport.STREAMABLE_HTTP,
    headers: list[dict[str, str]] | None = None,
    actor: Actor = SYSTEM,
    refresh: bool = True,
) -> McpServer:
    """A new connection; its tools are listed at once (a failure is kept in ``last_error``
    and the connection saved: the server may be up later)."""
    name = name.strip()
    if not NAME.match(name):
        raise ValidationError({"name": ["1-64 letters, digits, spaces, '.', '_' or '-'."]})
    if transport not in McpServer.Transport.values:
        raise ValidationError({"transport": [f"One of {', '.join(McpServer.Transport.values)}."]})
    try:
        url = outbound.clean_outbound_url(url, schemes=("https", "http"), what="server URL")
    except ValidationError as error:
        raise ValidationError({"url": error.messages}) from None
    cleaned = _clean_headers(workspace, url, headers or [])
    with transaction.atomic():
        _check_room(workspace, name)
        server = McpServer.objects.create(
            workspace=workspace, name=name, url=url, transport=transport, headers=cleaned
        )
        audit_record(
            workspace=workspace, actor=actor, action="mcp_server.created", target=name,
            details={"url": url_shown(url), "headers": [h["name"] for h in cleaned]},
        )  # fmt: skip
    if refresh:
        mcp_server_refresh(server=server)
    return server


def _check_room(workspace: Workspace, name: str) -> None:
    """Counted and named under the workspace's lock: requests at the same instant are
    refused one by one, never past the limit or into the unique name (a 500)."""
    workspace_lock(workspace_id=workspace.pk)
    if McpServer.objects.filter(workspace=workspace).count() >= settings.MCP_WORKSPACE_MAX_SERVERS:
        raise ValidationError(
            f"A workspace has at most {settings.MCP_WORKSPACE_MAX_SERVERS} MCP servers."
        )
    if McpServer.objects.filter(workspace=workspace, name=name).exists():
        raise ValidationError({"name": ["This workspace has an MCP server of that name."]})


def _clean_headers(
    workspace: Workspace, url: str, headers: list[dict[str, str]]
) -> list[dict[str, str]]:
    if len(headers) > MAX_HEADERS:
        raise ValidationError({"headers": [f"At most {MAX_HEADERS} headers."]})
    host = egress.parse(url, schemes=("https", "http")).host
    secrets = {s.name: s for s in Secret.objects.filter(workspace=workspace)}
    cleaned = []
    for header in headers:
        name, value = str(header.get("name", "")).strip(), str(header.get("value", "")).strip()
        if not HEADER_NAME.match(name) or not HEADER_VALUE.match(value):
            raise ValidationError(
                {"headers": [f"{name[:40]!r}: a header name and an ASCII value."]}
            )
        if name.lower() in MANAGED_HEADERS:
            raise ValidationError({"headers": [f"{name} is set by the platform."]})
        named = SECRET_PLACEHOLDER.findall(value)
        if name.lower() in CREDENTIAL_HEADERS and not named:
            raise ValidationError(
                {"headers": [f"{name} carries a credential: store it as a secret and write "
                             "{{secret:NAME}} here."]}
            )  # fmt: skip
        for secret_name in named:
            secret = secrets.get(secret_name)
            if secret is None:
                raise ValidationError({"headers": [f"No secret named {secret_name}."]})
            if not host_allowed(secret.allowed_hosts, host):
                raise ValidationError(
                    {"headers": [f"Secret {secret_name} may not be sent to {host}: add it to "
                                 "the secret's allowed hosts first."]}
                )  # fmt: skip
        cleaned.append({"name": name, "value": value})
    return cleaned


def mcp_server_delete(*, server: McpServer, actor: Actor = SYSTEM) -> None:
    agents = server.agent_tools.values("agent").distinct().count()
    with transaction.atomic():
        audit_record(
            workspace=server.workspace, actor=actor, action="mcp_server.deleted",
            target=server.name, details={"agents": agents},
        )  # fmt: skip
        server.delete()


def server_access(server: McpServer, bindings: list[SecretBinding]) -> connection.ServerAccess:
    """How to reach ``server``: its headers with secret references (values only at the
    transport, for the secrets' own hosts)."""
    by_name = {binding.name: binding for binding in bindings}

    def referenced(match: re.Match[str]) -> str:
        binding = by_name.get(match[1])
        if binding is None:
            raise connection.McpUnavailable(
                f"The tool server {server.name!r} needs secret {match[1]}, which is gone."
            )
        return binding.reference

    headers = {h["name"]: SECRET_PLACEHOLDER.sub(referenced, h["value"]) for h in server.headers}
    return connection.ServerAccess(
        name=server.name,
        url=server.url,
        transport="sse" if server.transport == McpServer.Transport.SSE else "streamable_http",
        policy=outbound.policy(),
        headers=headers,
        secrets=tuple(bindings),
        max_response_bytes=settings.MCP_RESPONSE_MAX_BYTES,
    )


def mcp_server_refresh(*, server: McpServer, actor: Actor = SYSTEM) -> McpServer:
    """List the server's tools again; the list (or why it failed) is kept on the row."""
    bindings = secret_bindings(workspace_id=server.workspace_id)
    try:
        access = server_access(server, bindings)
        listed = async_to_sync(connection.tools_list)(
            access,
            timeout_s=settings.MCP_LIST_TIMEOUT_S,
            max_tools=settings.MCP_SERVER_MAX_TOOLS,
            max_bytes=settings.MCP_LIST_MAX_BYTES,
            # Cut well past the kept length: masking comes after, and a cut through a
            # secret value would leave its start unmasked.
            description_max=DESCRIPTION_MAX * 4,
        )
    except connection.McpUnavailable as exc:
        logger.info("listing an MCP server's tools failed: %s", type(exc).__name__)
        server.last_error = storable(_masked(str(exc), bindings))[:500]
    else:
        server.tools = [_tool_entry(tool, bindings) for tool in listed]
        server.tools_refreshed_at = timezone.now()
        server.last_error = ""
    server.updated_at = timezone.now()
    fields = ["tools", "tools_refreshed_at", "last_error", "updated_at"]
    try:
        with transaction.atomic():
            server.save(update_fields=fields)
    except DatabaseError as exc:  # whatever in the list the database refused: kept as a problem
        logger.warning("an MCP server's tool list could not be saved: %s", type(exc).__name__)
        server.tools, server.last_error = [], UNSTORABLE_LIST
        server.save(update_fields=fields)
    return server


def _masked(text: str, bindings: list[SecretBinding]) -> str:
    return scrub(text, bindings) or ""


def _tool_entry(tool: connection.ListedTool, bindings: list[SecretBinding]) -> dict[str, Any]:
    """A listed tool as stored: its schema checked as a tool's own parameters are, and every
    string in it (name, description, the schema's names, titles, enums, defaults) scrubbed
    of the workspace's secret values, the way a call's result is. A tool whose name held a
    secret is kept only as a problem: a name the LLM would call it by cannot be masked."""

    def clean(text: str) -> str:
        return storable(_masked(text, bindings))

    problem = ""
    schema: dict[str, Any] = {}
    name = clean(tool.name)
    if name != storable(tool.name):
        problem = "its name holds a secret value of this workspace, so it is not offered"
    elif not TOOL_NAME.match(tool.name):
        problem = "its name is not one an LLM can call (letters, digits, '_' and '-', 64 at most)"
    else:
        try:
            checked = to_json_schema(tool.input_schema or {"type": "object", "properties": {}})
            schema = to_json_schema(strings_mapped(checked, clean))
        except SchemaError as exc:
            problem = clean(f"its input schema is unusable: {exc}")[:DESCRIPTION_MAX]
    return {
        "name": name[:128],
        "description": clean(tool.description)[:DESCRIPTION_MAX],
        "input_schema": schema,
        "problem": problem,
    }


# --- agents ---------------------------------------------------------------------------


def agent_mcp_tools_set(
    *, agent: Agent, tools: list[dict[str, Any]], actor: Actor = SYSTEM
) -> list[AgentMcpTool]:
    """Replace the MCP tools ``agent`` may call: [{server (uid), tool, timeout_ms?}]."""
    if len(tools) > AGENT_MAX_TOOLS:
        raise ValidationError({"tools": [f"An agent has at most {AGENT_MAX_TOOLS} MCP tools."]})
    servers = {str(s.uid): s for s in McpServer.objects.filter(workspace_id=agent.workspace_id)}
    own = {str(tool.get("name")) for tool in agent.tools} | {"search_knowledge"}
    chosen: list[AgentMcpTool] = []
    names: set[str] = set()
    for entry in tools:
        server = servers.get(str(entry.get("server", "")))
        if server is None:
            raise ValidationError({"tools": ["No MCP server of this workspace has that id."]})
        name = str(entry.get("tool", ""))
        listed = next((t for t in server.tools if t["name"] == name), None)
        if listed is None:
            raise ValidationError(
                {"tools": [f"{server.name} has no tool {name[:64]!r} (refresh its list?)."]}
            )
        if listed.get("problem"):
            raise ValidationError({"tools": [f"{name} cannot be offered: {listed['problem']}."]})
        if name in own or name in names:
            raise ValidationError({"tools": [f"This agent already has a tool named {name}."]})
        names.add(name)
        timeout_ms = entry.get("timeout_ms")
        if (
            timeout_ms is not None
            and not 100 <= int(timeout_ms) <= settings.MCP_TOOL_MAX_TIMEOUT_S * 1000
        ):
            raise ValidationError(
                {"tools": [f"timeout_ms: 100 to {int(settings.MCP_TOOL_MAX_TIMEOUT_S * 1000)}."]}
            )
        chosen.append(
            AgentMcpTool(agent=agent, server=server, tool=name,
                         timeout_ms=int(timeout_ms) if timeout_ms is not None else None)
        )  # fmt: skip
    with transaction.atomic():
        # One list replaced at a time: two at once would both delete, then insert the same
        # rows into the unique constraint (a 500).
        Agent.objects.select_for_update().filter(pk=agent.pk).exists()
        AgentMcpTool.objects.filter(agent=agent).delete()
        AgentMcpTool.objects.bulk_create(chosen)
        audit_record(
            workspace=agent.workspace, actor=actor, action="agent.mcp_tools_set",
            target=agent.slug, details={"tools": [f"{t.server.name}/{t.tool}" for t in chosen]},
        )  # fmt: skip
    return chosen
