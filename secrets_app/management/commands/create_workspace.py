from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from secrets_app import scopes, services
from secrets_app.models import ApiKey


class Command(BaseCommand):
    help = "Create a workspace (and its owner if needed) with one pk_ and one sk_ key."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--owner", required=True, help="owner's email; created if missing")
        parser.add_argument("--password", help="password for a newly created owner")
        parser.add_argument("--origin", action="append", default=[], help="allowed origin")
        parser.add_argument(
            "--inline-config",
            action="store_true",
            help="the pk_ key accepts instructions, greeting, voice and browser tools from pages",
        )
        parser.add_argument(
            "--inline-tool-code",
            action="store_true",
            help="the pk_ key accepts server-tool code from pages",
        )
        parser.add_argument("--json", action="store_true", help="print JSON only")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        owner, created = services.user_get_or_create(
            email=options["owner"], password=options["password"]
        )
        workspace = services.workspace_create(name=options["name"], owner=owner)
        _, publishable = services.api_key_create(
            workspace=workspace,
            kind=ApiKey.Kind.PUBLISHABLE,
            label="default",
            allowed_origins=options["origin"],
            allow_inline_config=options["inline_config"],
            allow_inline_tool_code=options["inline_tool_code"],
        )
        _, secret = services.api_key_create(
            workspace=workspace, kind=ApiKey.Kind.SECRET, label="default", scopes=scopes.ALL
        )
        result = {
            "workspace_id": workspace.pk,
            "publishable_key": publishable,
            "secret_key": secret,
        }
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        self.stdout.write(f"Workspace {workspace.name!r} (id {workspace.pk})")
        self.stdout.write(f"Owner: {owner.email}" + (" (new user)" if created else ""))
        self.stdout.write(f"Publishable key: {publishable}")
        self.stdout.write(f"Secret key (shown once, store it now): {secret}")
