from __future__ import annotations

from django.urls import path

from postcall_app import api

urlpatterns = [
    path(
        "sessions/<uuid:session_id>/analysis",
        api.SessionAnalysisApi.as_view(),
        name="session-analysis",
    ),
    path("retention", api.RetentionApi.as_view(), name="retention"),
]
