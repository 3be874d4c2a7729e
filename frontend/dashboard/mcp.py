"""MCP servers: a workspace's connections with their tool lists (refreshed on demand), and
which of those tools an agent may call (an allowlist: never "all").

Members see everything; owners and admins connect, refresh and delete (the platform dials
the server on the workspace's behalf, with its secrets in the headers).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path
from django.views.decorators.http import require_http_methods, require_POST

from core import outbound
from frontend.dashboard.scope import Scope, render_page, workspace_page
from mcp_app import selectors, services
from mcp_app.models import McpServer
from secrets_app.audit import actor_for_request
from sessions_app import selectors as agent_selectors

SECTION = "dashboard:mcp"


class ServerForm(forms.Form):
    name = forms.CharField(max_length=64)
    url = forms.CharField(label="URL", max_length=500, widget=forms.URLInput())
    transport = forms.ChoiceField(choices=McpServer.Transport.choices)
    header_name = forms.CharField(
        max_length=64, required=False, help_text="Optional, such as Authorization."
    )
    header_value = forms.CharField(
        max_length=2000, required=False,
        help_text="A credential as {{secret:NAME}}: a secret of this workspace whose allowed "
        "hosts include the server's.",
    )  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["url"].help_text = f"The server's MCP endpoint. {outbound.rule_in_words()}"


class AgentToolsForm(forms.Form):
    tools = forms.MultipleChoiceField(
        choices=[], required=False, widget=forms.CheckboxSelectMultiple
    )

    def __init__(self, *args: Any, servers: list[McpServer], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["tools"]
        assert isinstance(field, forms.MultipleChoiceField)
        field.choices = [
            (f"{server.uid}/{tool['name']}", f"{server.name}: {tool['name']}")
            for server in servers
            for tool in server.tools
            if not tool.get("problem")
        ]


def _require_manager(scope: Scope) -> None:
    if not scope.can_manage_keys:
        raise PermissionDenied("Only owners and admins can change MCP servers.")


@workspace_page
@require_http_methods(["GET", "POST"])
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    form = ServerForm(request.POST or None)
    if request.method == "POST":
        _require_manager(scope)
        if form.is_valid():
            data = form.cleaned_data
            headers = (
                [{"name": data["header_name"], "value": data["header_value"]}]
                if data["header_name"]
                else []
            )
            try:
                server = services.mcp_server_create(
                    workspace=scope.workspace, name=data["name"], url=data["url"],
                    transport=data["transport"], headers=headers, actor=actor_for_request(request),
                )  # fmt: skip
            except ValidationError as error:
                for name, texts in getattr(
                    error, "message_dict", {"__all__": error.messages}
                ).items():
                    form.add_error(name if name in form.fields else None, texts)
            else:
                messages.success(request, f"{server.name} connected: {len(server.tools)} tools.")
                return redirect(SECTION, scope.workspace.pk)
    context = {
        "servers": selectors.mcp_server_list(workspace=scope.workspace),
        "form": form,
        "can_manage": scope.can_manage_keys,
    }
    return render_page(request, scope, "dashboard/mcp.html", context, section=SECTION)


@workspace_page
@require_POST
def server_action(request: HttpRequest, scope: Scope, server_id: str, action: str) -> HttpResponse:
    _require_manager(scope)
    server = selectors.mcp_server_get(workspace=scope.workspace, uid=server_id)
    if action == "delete":
        services.mcp_server_delete(server=server, actor=actor_for_request(request))
        messages.success(request, f"{server.name} deleted; agents no longer offer its tools.")
    else:
        services.mcp_server_refresh(server=server)
        if server.last_error:
            messages.error(request, server.last_error)
        else:
            messages.success(request, f"{server.name}: {len(server.tools)} tools listed.")
    return redirect(SECTION, scope.workspace.pk)


@workspace_page
@require_http_methods(["GET", "POST"])
def agent_tools(request: HttpRequest, scope: Scope, slug: str) -> HttpResponse:
    agent = agent_selectors.agent_get(workspace=scope.workspace, slug=slug)
    servers = list(selectors.mcp_server_list(workspace=scope.workspace))
    chosen = selectors.agent_mcp_tools(workspace=scope.workspace, agent_id=agent.pk)
    timeouts = {f"{t.server.uid}/{t.tool}": t.timeout_ms for t in chosen}
    form = AgentToolsForm(request.POST or None, initial={"tools": list(timeouts)}, servers=servers)
    if request.method == "POST" and form.is_valid():
        tools = []
        for value in form.cleaned_data["tools"]:
            server, _, tool = value.partition("/")
            tools.append({"server": server, "tool": tool, "timeout_ms": timeouts.get(value)})
        try:
            services.agent_mcp_tools_set(agent=agent, tools=tools, actor=actor_for_request(request))
        except ValidationError as error:
            form.add_error(None, error.messages)
        else:
            messages.success(request, f"{agent.name}'s MCP tools saved.")
            return redirect("dashboard:agent-mcp", scope.workspace.pk, agent.slug)
    context = {"agent": agent, "form": form, "servers": servers}
    return render_page(
        request, scope, "dashboard/agent_mcp.html", context, section="dashboard:agents"
    )


urlpatterns = [
    path("mcp/", index, name="mcp"),
    path("mcp/<str:server_id>/<str:action>/", server_action, name="mcp-server"),
    path("agents/<slug:slug>/mcp/", agent_tools, name="agent-mcp"),
]
