"""Platform admins set each workspace's quotas here; usage is read-only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils import timezone

from usage_app.models import QuotaAlert, UsageDaily, WorkspaceQuota


@admin.register(WorkspaceQuota)
class WorkspaceQuotaAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = [
        "workspace", "llm_tokens_per_day", "llm_tokens_per_month", "voice_minutes_per_day",
        "voice_minutes_per_month", "tool_calls_per_day", "tool_calls_per_month", "updated_at",
    ]  # fmt: skip
    search_fields = ["workspace__name"]
    autocomplete_fields = ["workspace"]
    readonly_fields = ["updated_at"]

    def save_model(
        self, request: HttpRequest, obj: WorkspaceQuota, form: Any, change: bool
    ) -> None:
        obj.updated_at = timezone.now()
        super().save_model(request, obj, form, change)


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(UsageDaily)
class UsageDailyAdmin(ReadOnlyAdmin):
    list_display = [
        "day", "workspace", "agent_name", "sessions", "llm_requests", "prompt_tokens",
        "completion_tokens", "stt_audio_ms", "tts_characters", "server_tool_calls",
        "client_tool_calls", "phone_call_ms",
    ]  # fmt: skip
    list_filter = ["day"]
    search_fields = ["workspace__name", "agent_name"]


@admin.register(QuotaAlert)
class QuotaAlertAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "workspace", "metric", "period", "level", "used", "limit"]
    list_filter = ["level", "metric", "period"]
