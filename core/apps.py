from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The glue every app may use; at start it makes Django's settings the engine's host
    settings (a setting of the same name wins over the environment)."""

    name = "core"
    verbose_name = "Platform core"

    def ready(self) -> None:
        from django.conf import settings

        from engine import settings as engine_settings
        from engine import tracing

        engine_settings.use_host_settings(
            lambda name: getattr(settings, name, engine_settings.MISSING)
        )
        tracing.configure_from_environment()
