from __future__ import annotations

from django.apps import AppConfig


class UsageAppConfig(AppConfig):
    name = "usage_app"
    verbose_name = "Usage and quotas"
