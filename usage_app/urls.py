from __future__ import annotations

from django.urls import path

from usage_app import api

urlpatterns = [path("usage", api.UsageApi.as_view(), name="usage")]
