from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from secrets_app import crypto, services


class Command(BaseCommand):
    help = (
        "Re-encrypt every secret under the newest key of SECRETS_KEYRING. "
        "Append a new key to the keyring, restart, run this, then drop the old key."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        report = services.secrets_rotate()
        current = crypto.keyring().current_id
        self.stdout.write(
            f"key {current}: {report.rotated} re-encrypted, "
            f"{report.already_current} already current, {len(report.failed)} failed"
        )
        if report.failed:
            raise CommandError("could not decrypt (left unchanged): " + ", ".join(report.failed))
