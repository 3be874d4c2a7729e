from __future__ import annotations

from django.apps import AppConfig


class PostcallAppConfig(AppConfig):
    name = "postcall_app"
    verbose_name = "After the call: analysis and retention"
