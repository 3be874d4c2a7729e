from __future__ import annotations

import io
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from engine.providers.stt.local import turn as stt_local_turn


class Command(BaseCommand):
    help = (
        "Development (./dev.sh): everything before the server starts, in one Python start-up: "
        "the end-of-turn model (once), migrate, end_orphan_sessions, retention_purge, "
        "bootstrap_demo (its banner)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        stt_local_turn.install()
        call_command("migrate", interactive=False, verbosity=0)
        # Sessions that were live when the platform last stopped end now (no record stays "Live").
        call_command("end_orphan_sessions", verbosity=0, stdout=io.StringIO())
        # The embedded default has no Celery beat: each start purges what retention dropped.
        call_command("retention_purge", verbosity=0, stdout=io.StringIO())
        call_command("bootstrap_demo", base_url=options["base_url"], stdout=self.stdout)
