from __future__ import annotations

import json
import os
import secrets
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

import egress
from core import outbound
from engine.providers import registry
from secrets_app import scopes, services
from secrets_app.models import ApiKey, ProviderCredential, User, Workspace

Kind = ProviderCredential.Kind

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
                    *self._llm_lines(base, demo["workspace_id"]),
                    *self._egress_lines(),
                    "",
                ]
            )
        )

    def _llm_lines(self, base: str, workspace_id: int) -> list[str]:
        own = (
            ProviderCredential.objects.filter(workspace_id=workspace_id, kind=Kind.LLM)
            .order_by("created_at", "pk")
            .first()
        )
        if own is not None:  # the workspace's own wins over LLM_BASE_URL (its default)
            host = urlsplit(own.base_url).hostname
            tested = ""
            if own.check_ok is not None:
                tested = ", last test passed" if own.check_ok else ", last test failed"
            return [
                f"  Language model:   {own.model} at {host} (the demo workspace's connection "
                f"{own.name}{tested})",
                *_silence_lines(own.base_url),
            ]
        platform = registry.provider("llm", "openai").options()  # LLM_BASE_URL, LLM_MODEL
        if platform:
            host = urlsplit(platform["base_url"]).hostname
            return [
                f"  Language model:   {platform['model']} at {host}",
                *_silence_lines(platform["base_url"]),
            ]
        return [
            "  Language model:   none yet, so agents only repeat what they hear. A local Ollama:",
            "                    ollama pull llama3.2 && LLM_BASE_URL=http://127.0.0.1:11434/v1 "
            "LLM_MODEL=llama3.2 ./dev.sh",
            f"                    or per workspace: {base}/ → Providers → "
            "http://localhost:11434/v1",
        ]

    def _egress_lines(self) -> list[str]:
        if outbound.allows_private():
            return [
                "  Outbound URLs:    any address and port (DEV_ALLOW_PRIVATE_EGRESS=true: "
                "development only)"
            ]
        ports = ", ".join(str(port) for port in settings.EGRESS_PORTS)
        return [f"  Outbound URLs:    public addresses on ports {ports} only"]

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


# Long enough for a local server or a near provider, short enough that a start never waits.
ANSWER_TIMEOUT_S = 1.5


def _silence_lines(base_url: str) -> list[str]:
    """A warning when nothing answers at the model's address (sessions would then fail)."""
    parts = urlsplit(base_url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        return ["                    WARNING: not a URL the platform can dial"]
    address = egress.where(parts.hostname, port)
    if _answers(parts.hostname, port):
        return []
    return [
        f"                    WARNING: nothing answers at {address} (checked for "
        f"{ANSWER_TIMEOUT_S:g} s): start the model server, or sessions will say the "
        "language model is unavailable"
    ]


def _answers(host: str, port: int) -> bool:
    """Whether a TCP connection opens within the timeout; a daemon thread, so neither a slow
    name lookup nor a silent address holds the start-up longer than that."""
    done, opened = threading.Event(), threading.Event()

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=ANSWER_TIMEOUT_S).close()
            opened.set()
        except OSError:
            pass
        finally:
            done.set()

    threading.Thread(target=probe, daemon=True).start()
    done.wait(ANSWER_TIMEOUT_S)
    return opened.is_set()
