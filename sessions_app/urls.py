from __future__ import annotations

from django.urls import path

from sessions_app import api

urlpatterns = [
    path("agents", api.AgentListCreateApi.as_view(), name="agents"),
    path("agents/<slug:slug>", api.AgentDetailApi.as_view(), name="agent-detail"),
    path("sessions", api.SessionListApi.as_view(), name="sessions"),
    path("sessions/<uuid:session_id>", api.SessionDetailApi.as_view(), name="session-detail"),
    path("sessions/<uuid:session_id>/end", api.SessionEndApi.as_view(), name="session-end"),
    path("session-tokens", api.SessionTokenApi.as_view(), name="session-tokens"),
]
