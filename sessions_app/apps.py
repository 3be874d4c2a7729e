from __future__ import annotations

from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Agents and sessions"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from sessions_app import checks, recordings, versions  # noqa: F401 (its signal)
        from sessions_app.models import Agent

        checks.register()
        post_save.connect(versions.on_agent_saved, sender=Agent, dispatch_uid="agent-publish")
