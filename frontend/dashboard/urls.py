"""The dashboard's URLs: account pages at the root, workspace pages under ``/w/<id>/``."""

from __future__ import annotations

from django.urls import include, path

from frontend.dashboard import (
    accounts,
    agents,
    audit,
    keys,
    knowledge,
    knowledge_embedding,
    mcp,
    members,
    phones,
    playground,
    providers,
    retention,
    secret_store,
    security,
    sessions,
    usage,
    versions,
    webhooks,
)

app_name = "dashboard"

workspace_pages = [
    path("", accounts.workspace, name="workspace"),
    *agents.urlpatterns,
    *versions.urlpatterns,
    *playground.urlpatterns,
    *sessions.urlpatterns,
    *usage.urlpatterns,
    *secret_store.urlpatterns,
    *providers.urlpatterns,
    *knowledge_embedding.urlpatterns,
    *knowledge.urlpatterns,
    *mcp.urlpatterns,
    *webhooks.urlpatterns,
    *phones.urlpatterns,
    *keys.urlpatterns,
    *members.urlpatterns,
    *retention.urlpatterns,
    *audit.urlpatterns,
]

urlpatterns = [
    *accounts.urlpatterns,
    *members.account_urlpatterns,
    *security.urlpatterns,
    path("w/<id:workspace_id>/", include(workspace_pages)),
]
