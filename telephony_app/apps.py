from __future__ import annotations

from django.apps import AppConfig


class TelephonyAppConfig(AppConfig):
    name = "telephony_app"
    verbose_name = "Phone calls"

    def ready(self) -> None:
        from telephony_app import signals  # noqa: F401  (connects the receivers)
