"""REST API for MCP server connections, their tools, and the MCP tools an agent may call."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.parsers import JsonParser
from core.serializers import StrictSerializer, django_errors_as_drf
from mcp_app import api_examples as examples
from mcp_app import selectors, services
from mcp_app.models import McpServer
from secrets_app.audit import actor_for_request
from secrets_app.authentication import request_workspace
from sessions_app import selectors as agent_selectors

SCOPE = "mcp"


class HeaderInput(StrictSerializer):
    name = serializers.CharField(max_length=64)
    value = serializers.CharField(
        max_length=2000, help_text="Text; a credential as {{secret:NAME}}, expanded only for "
        "the secret's allowed hosts.",
    )  # fmt: skip


class ToolOutput(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    description = serializers.CharField()
    input_schema = serializers.DictField()
    problem = serializers.CharField(
        help_text="Why it cannot be offered to an agent; blank: it can."
    )


class McpServerOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    id = serializers.UUIDField(source="uid")
    url = serializers.CharField(
        source="url_masked",
        help_text="The endpoint as saved, each query value shown as `***` (tokens ride there).",
    )
    tools = ToolOutput(many=True)

    class Meta:
        model = McpServer
        fields = [
            "id", "name", "url", "transport", "headers", "tools", "tools_refreshed_at",
            "last_error", "created_at",
        ]  # fmt: skip


class McpServerInput(StrictSerializer):
    name = serializers.CharField(max_length=64)
    url = serializers.CharField(max_length=500, help_text="The server's MCP endpoint, http(s).")
    transport = serializers.ChoiceField(
        choices=McpServer.Transport.choices, default=McpServer.Transport.STREAMABLE_HTTP
    )
    headers = HeaderInput(many=True, required=False)


class AgentToolInput(StrictSerializer):
    server = serializers.UUIDField(help_text="The id of one of the workspace's MCP servers.")
    tool = serializers.CharField(max_length=128, help_text="A tool of its list, by name.")
    timeout_ms = serializers.IntegerField(required=False, allow_null=True, min_value=100)


class AgentToolsInput(StrictSerializer):
    tools = AgentToolInput(many=True, help_text="Replaces the list; [] removes them all.")


def _server(request: Request, server_id: str) -> McpServer:
    return selectors.mcp_server_get(workspace=request_workspace(request), uid=server_id)


@extend_schema(tags=["MCP servers"])
class McpServerListApi(APIView):
    scopes = {"GET": SCOPE, "POST": SCOPE}
    parser_classes = [JsonParser]

    @extend_schema(
        summary="List MCP servers",
        description="The workspace's MCP server connections, each with its tools as last listed.",
        responses=McpServerOutput(many=True),
        examples=examples.SERVER_LIST,
    )
    def get(self, request: Request) -> Response:
        servers = selectors.mcp_server_list(workspace=request_workspace(request))
        return Response(McpServerOutput(servers, many=True).data)

    @extend_schema(
        summary="Connect an MCP server",
        description="Saves the connection and lists its tools at once, through the egress "
        "guard (a failure is kept in `last_error`; refresh later). Limits: docs/mcp.md.",
        request=McpServerInput,
        responses={201: McpServerOutput},
        examples=examples.SERVER_CREATE,
    )
    def post(self, request: Request) -> Response:
        data = McpServerInput(data=request.data)
        data.is_valid(raise_exception=True)
        with django_errors_as_drf("name"):
            server = services.mcp_server_create(
                workspace=request_workspace(request), actor=actor_for_request(request),
                **data.validated_data,
            )  # fmt: skip
        return Response(McpServerOutput(server).data, status=status.HTTP_201_CREATED)


@extend_schema(tags=["MCP servers"])
class McpServerDetailApi(APIView):
    scopes = {"GET": SCOPE, "DELETE": SCOPE}

    @extend_schema(
        summary="Get an MCP server",
        description="One connection of the workspace, by its id, with its tools.",
        responses=McpServerOutput,
        examples=examples.SERVER_DETAIL,
    )
    def get(self, request: Request, server_id: str) -> Response:
        return Response(McpServerOutput(_server(request, server_id)).data)

    @extend_schema(
        summary="Delete an MCP server",
        description="Agents stop offering its tools from their next session on.",
        responses={204: None},
    )
    def delete(self, request: Request, server_id: str) -> Response:
        services.mcp_server_delete(
            server=_server(request, server_id), actor=actor_for_request(request)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["MCP servers"])
class McpServerRefreshApi(APIView):
    scopes = {"POST": SCOPE}

    @extend_schema(
        summary="List an MCP server's tools again",
        description="The list is kept on the connection; agents' sessions use it from "
        "their next session on. A failure is in `last_error`.",
        request=None,
        responses=McpServerOutput,
        examples=examples.SERVER_REFRESHED,
    )
    def post(self, request: Request, server_id: str) -> Response:
        server = services.mcp_server_refresh(server=_server(request, server_id))
        return Response(McpServerOutput(server).data)


@extend_schema(tags=["Agents"])
class AgentMcpToolsApi(APIView):
    scopes = {"GET": "agents", "PUT": "agents"}
    parser_classes = [JsonParser]

    def _output(self, request: Request, agent: Any) -> Response:
        chosen = selectors.agent_mcp_tools(workspace=request_workspace(request), agent_id=agent.pk)
        return Response(
            {
                "tools": [
                    {"server": str(t.server.uid), "tool": t.tool, "timeout_ms": t.timeout_ms}
                    for t in chosen
                ]
            }
        )

    @extend_schema(
        summary="Get an agent's MCP tools",
        description="The tools of the workspace's MCP servers this agent may call.",
        responses=AgentToolsInput,
        examples=examples.AGENT_TOOLS[1:],
    )
    def get(self, request: Request, slug: str) -> Response:
        agent = agent_selectors.agent_get(workspace=request_workspace(request), slug=slug)
        return self._output(request, agent)

    @extend_schema(
        summary="Set an agent's MCP tools",
        description="The tools the agent may call, by server and name (an allowlist: a "
        "server's other tools are never offered), each with its own timeout.",
        request=AgentToolsInput,
        responses=AgentToolsInput,
        examples=examples.AGENT_TOOLS,
    )
    def put(self, request: Request, slug: str) -> Response:
        agent = agent_selectors.agent_get(workspace=request_workspace(request), slug=slug)
        data = AgentToolsInput(data=request.data)
        data.is_valid(raise_exception=True)
        with django_errors_as_drf("tools"):
            services.agent_mcp_tools_set(
                agent=agent, tools=data.validated_data["tools"], actor=actor_for_request(request)
            )
        return self._output(request, agent)
