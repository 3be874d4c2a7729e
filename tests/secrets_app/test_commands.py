from __future__ import annotations

import io
import json

from django.core.management import call_command

from secrets_app.models import ApiKey, Membership
from tests.conftest import api_client


def test_create_workspace_prints_working_keys(db):
    out = io.StringIO()
    call_command(
        "create_workspace", "Acme", "--owner", "ceo@acme.test", "--password", "pw", "--json",
        stdout=out,
    )  # fmt: skip
    result = json.loads(out.getvalue())
    assert set(result) == {"workspace_id", "publishable_key", "secret_key"}
    assert result["publishable_key"].startswith("pk_")
    response = api_client(result["secret_key"]).get("/api/v1/keys")
    assert response.status_code == 200
    assert {k["kind"] for k in response.json()} == {"publishable", "secret"}
    membership = Membership.objects.get(workspace_id=result["workspace_id"])
    assert (membership.user.email, membership.role) == ("ceo@acme.test", "owner")


def test_create_workspace_reuses_an_existing_owner(db):
    for name in ("One", "Two"):
        call_command("create_workspace", name, "--owner", "same@acme.test", "--json",
                     stdout=io.StringIO())  # fmt: skip
    assert Membership.objects.filter(user__email="same@acme.test").count() == 2
    assert ApiKey.objects.count() == 4


def test_the_demo_says_how_to_connect_a_local_ollama(db, settings, tmp_path):
    settings.DEBUG = True  # a development command (tests run with DEBUG off)
    settings.VAR_DIR = tmp_path
    settings.LLM_BASE_URL = None
    out = io.StringIO()
    call_command("bootstrap_demo", "--base-url", "http://127.0.0.1:9000", stdout=out)
    printed = out.getvalue()
    assert "Language model:   none yet" in printed
    assert "LLM_BASE_URL=http://127.0.0.1:11434/v1 LLM_MODEL=llama3.2 ./dev.sh" in printed
    assert "http://127.0.0.1:9000/ → Providers" in printed
    settings.LLM_BASE_URL = "https://api.openai.com/v1"
    out = io.StringIO()
    call_command("bootstrap_demo", stdout=out)
    assert "Language model:   gpt-4o-mini at api.openai.com" in out.getvalue()
