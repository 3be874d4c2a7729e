from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from secrets_app.audit import actor_for_request
from sessions_app import versions
from sessions_app.agent_tools import AgentToolsInvalid
from sessions_app.models import (
    Agent,
    AgentVersion,
    RetentionPolicy,
    Session,
    SessionAnalysis,
    ToolCallRecord,
    TranscriptEntry,
)
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


class AgentVersionInline(admin.TabularInline):  # type: ignore[type-arg]
    """Read-only: a version never changes (docs/versions.md)."""

    model = AgentVersion
    extra = 0
    can_delete = False
    fields = readonly_fields = ("number", "note", "created_by", "created_at", "digest")

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = AgentAdminForm
    list_display = ["name", "slug", "workspace", "mode", "llm_model", "updated_at"]
    list_filter = ["mode"]
    search_fields = ["name", "slug", "workspace__name"]
    inlines = [AgentVersionInline]

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        with versions.published_by_caller():
            super().save_model(request, obj, form, change)
        # Like every other save: published at once unless the agent keeps drafts.
        versions.agent_changed(agent=obj, actor=actor_for_request(request))


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


@admin.register(SessionAnalysis)
class SessionAnalysisAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["session", "workspace", "status", "requested_at", "completed_at"]
    list_filter = ["status"]
    readonly_fields = [f.name for f in SessionAnalysis._meta.fields]

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Read-only here: a change goes through the API or the dashboard, which audit it."""

    list_display = ["workspace", "transcripts_days", "tool_logs_days", "analysis_days",
                    "recordings_days", "zero_retention", "redact_transcripts"]  # fmt: skip
    readonly_fields = [f.name for f in RetentionPolicy._meta.fields]

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False
