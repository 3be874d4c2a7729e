"""Write the browser library's protocol names (``frontend/lib/protocol-generated.*``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from engine import protocol_js
from frontend.library import LIB_DIR


class Command(BaseCommand):
    help = "Write frontend/lib/protocol-generated.js and .d.ts from engine/protocol.py."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--check", action="store_true", help="write nothing; fail if a file is out of date"
        )

    def handle(self, *args: Any, check: bool = False, **options: Any) -> None:
        stale = [
            name
            for name, text in protocol_js.rendered().items()
            if not (LIB_DIR / name).exists() or (LIB_DIR / name).read_text() != text
        ]
        if check:
            if stale:
                raise CommandError(f"out of date: {', '.join(stale)} (run manage.py protocol_js)")
            return
        for name in stale:
            (LIB_DIR / name).write_text(protocol_js.rendered()[name])
            self.stdout.write(f"wrote frontend/lib/{name}")
