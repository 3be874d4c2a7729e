from __future__ import annotations

from django.apps import AppConfig


class SecretsAppConfig(AppConfig):
    name = "secrets_app"
    verbose_name = "Tenancy and credentials"

    def ready(self) -> None:
        from secrets_app import crypto

        # Fail at start, naming SECRETS_KEYRING, rather than at the first secret read.
        crypto.keyring()
