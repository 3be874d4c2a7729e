from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from secrets_app import crypto


class Command(BaseCommand):
    help = "Print a new 'id:base64key' entry to append to SECRETS_KEYRING."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key_id", help="a short id, e.g. k2 or 2026-11")

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(crypto.new_keyring_entry(options["key_id"]))
