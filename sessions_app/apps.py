from __future__ import annotations

from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Agents and sessions"

    def ready(self) -> None:
        from secrets_app.signals import api_key_disabled
        from sessions_app import checks, control

        checks.register()

        api_key_disabled.connect(control.on_api_key_disabled, dispatch_uid="end-key-sessions")
