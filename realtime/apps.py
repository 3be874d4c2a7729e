from __future__ import annotations

from django.apps import AppConfig


class RealtimeConfig(AppConfig):
    name = "realtime"
    verbose_name = "Realtime sessions"

    def ready(self) -> None:
        from realtime import control
        from secrets_app.signals import api_key_disabled
        from sessions_app.session_control import session_control_install

        # The sessions API ends live sessions through this app (a layer above it).
        session_control_install(control)
        api_key_disabled.connect(control.on_api_key_disabled, dispatch_uid="end-key-sessions")
