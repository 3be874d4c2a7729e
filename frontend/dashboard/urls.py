"""The dashboard's URLs: account pages at the root, workspace pages under ``/w/<id>/``."""

from __future__ import annotations

from django.urls import include, path

from frontend.dashboard import (
    accounts,
    agents,
    keys,
    members,
    playground,
    providers,
    secret_store,
    sessions,
    usage,
    webhooks,
)

app_name = "dashboard"

workspace_pages = [
    path("", accounts.workspace, name="workspace"),
    *agents.urlpatterns,
    *playground.urlpatterns,
    *sessions.urlpatterns,
    *usage.urlpatterns,
    *secret_store.urlpatterns,
    *providers.urlpatterns,
    *webhooks.urlpatterns,
    *keys.urlpatterns,
    *members.urlpatterns,
]

urlpatterns = [
    *accounts.urlpatterns,
    *members.account_urlpatterns,
    path("w/<int:workspace_id>/", include(workspace_pages)),
]
