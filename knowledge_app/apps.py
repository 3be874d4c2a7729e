from __future__ import annotations

from django.apps import AppConfig


class KnowledgeAppConfig(AppConfig):
    name = "knowledge_app"
    verbose_name = "Knowledge bases"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from knowledge_app import session_tool

        # The engine names no app: the knowledge kind registers itself.
        session_tool.register()
