from __future__ import annotations

from django.urls import path

from sessions_app import api, versions_api

urlpatterns = [
    path("agents", api.AgentListCreateApi.as_view(), name="agents"),
    path("agents/<slug:slug>", api.AgentDetailApi.as_view(), name="agent-detail"),
    path("agents/<slug:slug>/versions", versions_api.VersionListApi.as_view(), name="versions"),
    path(
        "agents/<slug:slug>/versions/diff",
        versions_api.VersionDiffApi.as_view(),
        name="version-diff",
    ),
    path(
        "agents/<slug:slug>/versions/<int:version>",
        versions_api.VersionDetailApi.as_view(),
        name="version-detail",
    ),
    path("agents/<slug:slug>/publish", versions_api.PublishApi.as_view(), name="agent-publish"),
    path("agents/<slug:slug>/rollback", versions_api.RollbackApi.as_view(), name="agent-rollback"),
    path("agents/<slug:slug>/traffic-split", versions_api.SplitApi.as_view(), name="agent-split"),
    path(
        "agents/<slug:slug>/key-pins/<id:key_id>",
        versions_api.PinApi.as_view(),
        name="agent-key-pin",
    ),
    path("sessions", api.SessionListApi.as_view(), name="sessions"),
    path("sessions/<uuid:session_id>", api.SessionDetailApi.as_view(), name="session-detail"),
    path("sessions/<uuid:session_id>/end", api.SessionEndApi.as_view(), name="session-end"),
    path("session-tokens", api.SessionTokenApi.as_view(), name="session-tokens"),
]
