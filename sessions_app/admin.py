from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from sessions_app.agent_tools import AgentToolsInvalid
from sessions_app.models import Agent, Session, ToolCallRecord, TranscriptEntry
from sessions_app.services import agent_tools_clean


class AgentAdminForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Agent
        fields = [
            "workspace", "name", "slug", "instructions", "greeting", "voice", "mode",
            "llm_model", "stt_provider", "tts_provider", "tools",
        ]  # fmt: skip

    def clean_tools(self) -> list[dict[str, Any]]:
        # Same validation and handler pinning as the API; every refusal on this one field.
        try:
            return agent_tools_clean(self.cleaned_data["tools"] or [])
        except AgentToolsInvalid as exc:
            raise forms.ValidationError(
                [f"{e.path}: {e.message}" for e in exc.tool_errors]
            ) from None


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = AgentAdminForm
    list_display = ["name", "slug", "workspace", "mode", "llm_model", "updated_at"]
    list_filter = ["mode"]
    search_fields = ["name", "slug", "workspace__name"]


class TranscriptInline(admin.TabularInline):  # type: ignore[type-arg]
    model = TranscriptEntry
    extra = 0
    can_delete = False
    readonly_fields = ["role", "text", "created_at"]

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class ToolCallInline(admin.TabularInline):  # type: ignore[type-arg]
    """Read-only: a record of what happened (texts already scrubbed of secret values)."""

    model = ToolCallRecord
    extra = 0
    can_delete = False
    fields = readonly_fields = (
        "name", "status", "duration_ms", "arguments", "result", "error", "call_id", "created_at",
    )  # fmt: skip

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["public_id", "workspace", "agent", "mode", "started_at", "ended_at"]
    list_filter = ["mode"]
    search_fields = ["public_id", "workspace__name"]
    readonly_fields = [f.name for f in Session._meta.fields]
    inlines = [TranscriptInline, ToolCallInline]
