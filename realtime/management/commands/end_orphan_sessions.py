from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from realtime import control


class Command(BaseCommand):
    help = (
        "Close the records of live sessions that no web process holds any more (a restart, a "
        "crash): they end with code 1012. Run at start; on the embedded default only while "
        "the platform itself is not running (its sessions are held in its memory)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        ended = control.sessions_sweep()
        self.stdout.write(f"{ended} session record(s) closed")
