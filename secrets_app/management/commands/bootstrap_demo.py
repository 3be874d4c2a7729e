from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from secrets_app import scopes, services
from secrets_app.models import ApiKey, User, Workspace

DEMO_EMAIL = "admin@example.com"


class Command(BaseCommand):
    help = (
        "Development only: create an admin login and a demo workspace with keys once, "
        "keep them in var/demo.json, and print them on every run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        base = options["base_url"].rstrip("/")
        if not settings.DEBUG:
            raise CommandError("bootstrap_demo is for development (DEBUG=true) only")
        path = Path(settings.VAR_DIR) / "demo.json"
        demo = self._load(path) or self._create(path)
        self.stdout.write(
            "\n".join(
                [
                    "",
                    f"Voice agent platform (embedded defaults) on {base}",
                    f"  Dashboard:        {base}/  {demo['email']} / {demo['password']}",
                    f"  Admin:            {base}/admin/  (same login)",
                    f"  API docs:         {base}/api/docs/",
                    f"  Publishable key:  {demo['publishable_key']}",
                    f"  Secret key:       {demo['secret_key']}",
                    *self._llm_lines(base),
                    "",
                ]
            )
        )

    def _llm_lines(self, base: str) -> list[str]:
        if settings.LLM_BASE_URL:
            host = urlsplit(settings.LLM_BASE_URL).hostname
            return [f"  Language model:   {settings.LLM_MODEL} at {host}"]
        return [
            "  Language model:   none yet, so agents only repeat what they hear. A local Ollama:",
            "                    ollama pull llama3.2 && LLM_BASE_URL=http://127.0.0.1:11434/v1 "
            "LLM_MODEL=llama3.2 ./dev.sh",
            f"                    or per workspace: {base}/ → Providers (a local address there "
            "needs SANDBOX_EGRESS_ALLOW_PRIVATE=true)",
        ]

    def _load(self, path: Path) -> dict[str, Any] | None:
        if not path.exists():
            return None
        demo: dict[str, Any] = json.loads(path.read_text())
        exists = (
            demo.get("workspace_id") is not None
            and Workspace.objects.filter(pk=demo["workspace_id"]).exists()
        )
        return demo if exists and User.objects.filter(email=demo["email"]).exists() else None

    @transaction.atomic
    def _create(self, path: Path) -> dict[str, Any]:
        password = secrets.token_urlsafe(12)
        user, _ = services.user_get_or_create(email=DEMO_EMAIL)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        workspace = services.workspace_create(name="Demo", owner=user)
        # Local development only: pages may send their own instructions and tool code.
        _, publishable = services.api_key_create(
            workspace=workspace,
            kind=ApiKey.Kind.PUBLISHABLE,
            label="demo (local development: inline config and tool code on)",
            allow_inline_config=True,
            allow_inline_tool_code=True,
        )
        _, secret = services.api_key_create(
            workspace=workspace, kind=ApiKey.Kind.SECRET, label="demo", scopes=scopes.ALL
        )
        demo = {
            "email": DEMO_EMAIL,
            "password": password,
            "workspace_id": workspace.pk,
            "publishable_key": publishable,
            "secret_key": secret,
        }
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(demo, handle)
        return demo
