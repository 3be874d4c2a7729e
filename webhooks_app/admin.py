"""Webhooks in the admin: endpoints without their secrets, deliveries read-only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from webhooks_app.models import WebhookDelivery, WebhookEndpoint

# Kept by the platform: how the endpoint's deliveries are going (docs/webhooks.md).
HEALTH_FIELDS = ["consecutive_failures", "backoff_until", "disabled_reason", "disabled_at"]


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["url", "workspace", "enabled", "consecutive_failures", "created_at"]
    list_filter = ["enabled"]
    search_fields = ["url", "workspace__name"]
    fields = [
        *["workspace", "url", "description", "events", "enabled", "secret_hint", "created_at"],
        *HEALTH_FIELDS,
    ]
    readonly_fields = ["workspace", "url", "secret_hint", "created_at", *HEALTH_FIELDS]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # the signing secret must be shown once; the dashboard does that


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = [
        "created_at", "event_type", "endpoint", "status", "attempts", "last_status_code",
    ]  # fmt: skip
    list_filter = ["status", "event_type"]
    exclude = ["payload"]  # transcripts: the customer's data, not the operator's reading

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
