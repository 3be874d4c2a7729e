"""The playground: talk to a saved agent with client.js, the live event log beside it."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

from frontend.dashboard.scope import Scope, render_page, workspace_page
from secrets_app import services as key_services
from secrets_app.audit import actor_for_request
from secrets_app.models import ApiKey
from sessions_app import selectors


def _origin(request: HttpRequest) -> str:
    return f"{request.scheme}://{request.get_host()}"


@workspace_page
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    agents = list(selectors.agent_list(workspace=scope.workspace))
    chosen = request.GET.get("agent", "")
    selected = next((a for a in agents if a.slug == chosen), agents[0] if agents else None)
    key: ApiKey | None = None
    refusal = ""
    if agents:
        try:
            key = key_services.api_key_for_playground(
                workspace=scope.workspace, origin=_origin(request), actor=actor_for_request(request)
            )
        except key_services.KeyRejected as rejected:  # an unverified address: no key at all
            refusal = rejected.reason
    context = {
        "refusal": refusal,
        "agents": agents,
        "selected": selected,
        "mode": request.GET.get("mode") or (selected.mode if selected else "voice"),
        "key": key,
    }
    return render_page(
        request, scope, "dashboard/playground.html", context, section="dashboard:playground"
    )


urlpatterns = [path("playground/", index, name="playground")]
