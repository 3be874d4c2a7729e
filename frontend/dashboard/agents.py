"""Agents: the list, the template gallery, the editor (new and edit) and delete.

Any member of the workspace may edit agents. A handler saved here is pinned (its hash
is stored by the service). Saved by an owner or admin, it also sees the values of the
secrets marked "readable by code"; everyone else's handlers only hold references.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path
from django.views.decorators.http import require_http_methods

from frontend.dashboard.agent_forms import AgentEditor
from frontend.dashboard.agent_templates import TEMPLATES, AgentTemplate
from frontend.dashboard.scope import (
    ActionRefused,
    Scope,
    confirm_then,
    render_page,
    workspace_page,
)
from secrets_app.audit import actor_for_request
from secrets_app.provider_credentials import provider_names
from sessions_app import selectors, services
from sessions_app.agent_warnings import agent_warnings
from sessions_app.models import Agent

SECTION = "dashboard:agents"


@workspace_page
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    agents = selectors.agent_list(workspace=scope.workspace)
    return render_page(request, scope, "dashboard/agents.html", {"agents": agents}, section=SECTION)


@workspace_page
def gallery(request: HttpRequest, scope: Scope) -> HttpResponse:
    context = {"templates": list(TEMPLATES.values())}
    return render_page(request, scope, "dashboard/agent_templates.html", context, section=SECTION)


def _template(request: HttpRequest) -> AgentTemplate | None:
    template_id = request.GET.get("template")
    if not template_id:
        return None
    if template_id not in TEMPLATES:
        raise Http404("No such template.")
    return TEMPLATES[template_id]


def _editor_page(
    request: HttpRequest,
    scope: Scope,
    editor: AgentEditor,
    *,
    agent: Agent | None = None,
    template: AgentTemplate | None = None,
) -> HttpResponse:
    # What the saved agent needs that the workspace does not have yet (saved anyway).
    warnings = agent_warnings(agent=agent) if agent is not None else []
    context = {"editor": editor, "agent": agent, "template": template, "warnings": warnings}
    return render_page(request, scope, "dashboard/agent_form.html", context, section=SECTION)


@workspace_page
@require_http_methods(["GET", "POST"])
def create(request: HttpRequest, scope: Scope) -> HttpResponse:
    template = _template(request)
    editor = AgentEditor(
        request.POST or None,
        template=template,
        providers=provider_names(workspace=scope.workspace),
    )
    if request.method == "POST" and editor.is_valid():
        try:
            agent = services.agent_create(
                actor=actor_for_request(request),
                workspace=scope.workspace,
                tools=editor.tool_list(),
                reads_secrets=scope.can_read_secrets,
                **editor.agent_fields(),
            )
        except ValidationError as error:
            editor.add_service_error(error)
        else:
            messages.success(request, f"Agent “{agent.name}” created.")
            return redirect("dashboard:agent-edit", scope.workspace.pk, agent.slug)
    return _editor_page(request, scope, editor, template=template)


@workspace_page
@require_http_methods(["GET", "POST"])
def edit(request: HttpRequest, scope: Scope, slug: str) -> HttpResponse:
    agent = selectors.agent_get(workspace=scope.workspace, slug=slug)
    editor = AgentEditor(
        request.POST or None,
        agent=agent,
        providers=provider_names(workspace=scope.workspace),
    )
    if request.method == "POST" and editor.is_valid():
        try:
            agent = services.agent_update(
                actor=actor_for_request(request),
                agent=agent,
                tools=editor.tool_list(),
                reads_secrets=scope.can_read_secrets,
                **editor.agent_fields(),
            )
        except ValidationError as error:
            editor.add_service_error(error)
            # The refused update changed the instance in memory; show the saved one.
            agent = selectors.agent_get(workspace=scope.workspace, slug=slug)
        else:
            messages.success(request, f"Agent “{agent.name}” saved.")
            return redirect("dashboard:agent-edit", scope.workspace.pk, agent.slug)
    return _editor_page(request, scope, editor, agent=agent)


@workspace_page
@require_http_methods(["GET", "POST"])
def delete(request: HttpRequest, scope: Scope, slug: str) -> HttpResponse:
    agent = selectors.agent_get(workspace=scope.workspace, slug=slug)

    def act() -> str:
        try:
            services.agent_delete(actor=actor_for_request(request), agent=agent)
        except services.AgentInUse as in_use:
            raise ActionRefused(f"Agent “{agent.name}” was not deleted: {in_use}.") from None
        return f"Agent “{agent.name}” deleted."

    context = {"agent": agent}
    return confirm_then(
        request, scope, "dashboard/agent_delete.html", context, section=SECTION, act=act
    )


urlpatterns = [
    path("agents/", index, name="agents"),
    path("agents/templates/", gallery, name="agent-templates"),
    path("agents/new/", create, name="agent-new"),
    path("agents/<slug:slug>/", edit, name="agent-edit"),
    path("agents/<slug:slug>/delete/", delete, name="agent-delete"),
]
