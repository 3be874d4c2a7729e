from __future__ import annotations

import io
import json
import socket

from django.core.management import call_command

from secrets_app.models import ApiKey, Membership, Workspace
from secrets_app.provider_credentials import provider_credential_checked, provider_llm_set
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


def test_the_demo_banner_names_the_workspaces_own_llm_and_the_egress_rule(db, settings, tmp_path):
    settings.DEBUG = True
    settings.VAR_DIR = tmp_path
    settings.LLM_BASE_URL = "https://api.openai.com/v1"
    settings.DEV_ALLOW_PRIVATE_EGRESS = True  # as ./dev.sh sets it
    call_command("bootstrap_demo", stdout=io.StringIO())
    demo = json.loads((tmp_path / "demo.json").read_text())
    workspace = Workspace.objects.get(pk=demo["workspace_id"])
    row = provider_llm_set(
        workspace=workspace, name="local-ollama", base_url="http://localhost:11434/v1",
        model="llama3.2",
    )  # fmt: skip
    provider_credential_checked(credential=row, ok=True, message="Connected")
    out = io.StringIO()
    call_command("bootstrap_demo", stdout=out)
    printed = out.getvalue()
    assert (
        "Language model:   llama3.2 at localhost (the demo workspace's connection "
        "local-ollama, last test passed)"
    ) in printed
    assert "none yet" not in printed and "gpt-4o-mini" not in printed
    assert "DEV_ALLOW_PRIVATE_EGRESS=true" in printed
    settings.DEV_ALLOW_PRIVATE_EGRESS = False
    out = io.StringIO()
    call_command("bootstrap_demo", stdout=out)
    assert "Outbound URLs:    public addresses on ports 80, 443 only" in out.getvalue()


def test_the_banner_warns_when_the_language_model_does_not_answer(db, settings, tmp_path):
    settings.DEBUG = True
    settings.VAR_DIR = tmp_path
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        settings.LLM_BASE_URL = f"http://127.0.0.1:{port}/v1"
        out = io.StringIO()
        call_command("bootstrap_demo", stdout=out)
        assert "Language model:   gpt-4o-mini at 127.0.0.1" in out.getvalue()
        assert "WARNING" not in out.getvalue()
    out = io.StringIO()  # the same address, nothing listening there any more
    call_command("bootstrap_demo", stdout=out)
    assert f"WARNING: nothing answers at 127.0.0.1:{port}" in out.getvalue()


def test_prepare_dev_ends_orphans_and_prints_the_banner(db, settings, tmp_path, monkeypatch):
    """./dev.sh's one step before the server (it used to be four Python start-ups)."""
    swept: list[bool] = []
    monkeypatch.setattr("realtime.control.sessions_sweep", lambda: swept.append(True) or 0)
    settings.DEBUG = True
    settings.VAR_DIR = tmp_path
    settings.LLM_BASE_URL = None
    out = io.StringIO()
    call_command("prepare_dev", "--base-url", "http://127.0.0.1:9000", stdout=out)
    printed = out.getvalue()
    assert "on http://127.0.0.1:9000" in printed and "Publishable key:  pk_" in printed
    assert swept == [True] and "session record(s) closed" not in printed  # quietly
