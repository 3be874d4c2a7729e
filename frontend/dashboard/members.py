"""PLACEHOLDER: replaced by the room's real pages."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

from frontend.dashboard.scope import Scope, render_page, workspace_page


@workspace_page
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    return render_page(
        request,
        scope,
        "dashboard/placeholder.html",
        {"title": "Members"},
        section="dashboard:members",
    )


urlpatterns = [path("members/", index, name="members")]
account_urlpatterns: list = []
