from __future__ import annotations

from django.urls import path

from evals_app import api

urlpatterns = [
    path("agents/<slug:slug>/tests", api.AgentTestListApi.as_view(), name="agent-tests"),
    path(
        "agents/<slug:slug>/tests/<str:name>",
        api.AgentTestDetailApi.as_view(),
        name="agent-test-detail",
    ),
    path("agents/<slug:slug>/test-runs", api.TestRunListApi.as_view(), name="test-runs"),
    path("test-runs/<uuid:run_id>", api.TestRunDetailApi.as_view(), name="test-run-detail"),
    path("agents/<slug:slug>/simulations", api.SimulationListApi.as_view(), name="simulations"),
]
