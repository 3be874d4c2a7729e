from __future__ import annotations

from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "evals_app"
    verbose_name = "Agent tests and simulations"

    def ready(self) -> None:
        from evals_app.selectors import publish_refusal
        from sessions_app.versions import publish_gate_install

        # Publishing (a layer below) asks this app whether the draft's tests passed.
        publish_gate_install(publish_refusal)
