"""The dashboard's URLs: account pages at the root, workspace pages under ``/w/<id>/``."""

from __future__ import annotations

from django.urls import include, path

from frontend.dashboard import (
    accounts,
    agents,
    audit,
    keys,
    members,
    playground,
    providers,
    secret_store,
    security,
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
    *audit.urlpatterns,
]

urlpatterns = [
    *accounts.urlpatterns,
    *members.account_urlpatterns,
    *security.urlpatterns,
    path("w/<id:workspace_id>/", include(workspace_pages)),
]
