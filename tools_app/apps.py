from __future__ import annotations

from django.apps import AppConfig


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    verbose_name = "Tools and sandbox"

    def ready(self) -> None:
        from engine.providers import registry

        # The engine names no app: the sandbox runner registers itself.
        registry.register("tools", "sandbox", "tools_app.runner.PROVIDER")
