from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from platform_site import converters, health  # noqa: F401  (registers the id converter)
from platform_site.metrics_view import metrics_view
from sessions_app import recording_views

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("secrets_app.urls")),
    path("api/v1/", include("sessions_app.urls")),
    path("api/v1/", include("usage_app.urls")),
    path("api/v1/", include("postcall_app.urls")),
    path("api/v1/", include("knowledge_app.urls")),
    path("api/v1/", include("mcp_app.urls")),
    path("api/v1/", include("telephony_app.urls")),
    path("api/v1/", include("evals_app.urls")),
    path("phone/", include("telephony_app.carrier_urls")),
    # Signed, short-lived: the token is the credential (sessions_app.recordings).
    path("recordings/<str:token>", recording_views.play, name="recording-play"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its start-up script as a file: no inline script for a CSP to block.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include("frontend.urls")),
]
