"""The audit log: every security-relevant change of the workspace, newest first (owners)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.urls import path

from frontend.dashboard.scope import Scope, render_page, workspace_page
from secrets_app import selectors

PAGE_SIZE = 50


@workspace_page
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    scope.require_owner("see the audit log")
    events = selectors.audit_event_list(workspace=scope.workspace)
    page = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    return render_page(
        request, scope, "dashboard/audit.html", {"page": page}, section="dashboard:audit"
    )


urlpatterns = [path("audit/", index, name="audit")]
