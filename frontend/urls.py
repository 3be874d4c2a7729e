from __future__ import annotations

from django.urls import include, path, re_path

from frontend import views

urlpatterns = [
    path("favicon.ico", views.favicon, name="favicon"),
    path("client.js", views.entry, {"name": "client.js"}, name="client-js"),
    path("react.js", views.entry, {"name": "react.js"}, name="react-js"),
    path("sdk/voice-agent.tgz", views.sdk_package, name="sdk-package"),
    re_path(
        r"^lib/(?P<digest>[0-9a-f]{16})/(?P<name>[A-Za-z0-9.-]+)$",
        views.library_file,
        name="library-file",
    ),
    path("", include("frontend.dashboard.urls")),
]
