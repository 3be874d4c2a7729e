from __future__ import annotations

from django.contrib import admin

from evals_app.models import AgentTest, Simulation, TestRun


@admin.register(AgentTest)
class AgentTestAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "agent", "workspace", "created_at"]
    search_fields = ["name", "agent__slug", "workspace__name"]


@admin.register(TestRun)
class TestRunAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["uid", "agent", "workspace", "status", "created_at", "finished_at"]
    list_filter = ["status"]
    readonly_fields = [f.name for f in TestRun._meta.fields]


@admin.register(Simulation)
class SimulationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["uid", "agent", "workspace", "status", "created_at", "finished_at"]
    list_filter = ["status"]
    readonly_fields = [f.name for f in Simulation._meta.fields]
