"""The Providers page: a workspace's own LLM connections and speech keys, write-only."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from secrets_app import provider_credentials as credentials
from secrets_app.models import AuditEvent, ProviderCredential
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import page

KEY = "sk-proj-never-shown-5e6f7a8b"


@pytest.fixture(autouse=True)
def _no_platform_llm(settings):
    settings.LLM_BASE_URL = None


def _add(client: Client, tenant: Tenant, **fields: str) -> str:
    data = {"name": "openai", "base_url": "https://api.openai.com/v1", "model": "gpt-4o-mini",
            "api_key": KEY, **fields}  # fmt: skip
    return client.post(page(tenant, "provider-llm-new"), data, follow=True).content.decode()


def test_no_llm_is_said_on_every_page_with_a_link(owner: Tenant, owner_client: Client) -> None:
    for name in ("agents", "playground", "sessions", "usage", "providers"):
        html = owner_client.get(page(owner, name)).content.decode()
        assert "No language model is connected" in html
        assert f'href="{page(owner, "providers")}"' in html


def test_add_an_llm_connection_and_never_see_the_key(
    owner: Tenant, owner_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    html = _add(owner_client, owner)
    assert "LLM connection openai saved" in html and KEY not in html
    assert "No language model is connected" not in html
    row = ProviderCredential.objects.get(workspace=owner.workspace)
    assert credentials.credential_open(credential=row) == KEY
    edit = owner_client.get(page(owner, "provider-llm", row.pk)).content.decode()
    assert 'type="password"' in edit and KEY not in edit
    # Saving again with the key left empty keeps it.
    owner_client.post(
        page(owner, "provider-llm", row.pk),
        {"base_url": "https://api.openai.com/v1", "model": "gpt-4o", "api_key": ""},
    )
    row.refresh_from_db()
    assert row.model == "gpt-4o" and credentials.credential_open(credential=row) == KEY
    assert KEY not in caplog.text


def test_bad_input_is_refused_on_its_field(owner: Tenant, owner_client: Client) -> None:
    html = _add(owner_client, owner, base_url="ftp://files.example.com", name="Bad Name")
    assert "must start with https:// or http://" in html
    assert not ProviderCredential.objects.exists()
    html = _add(owner_client, owner, base_url="http://192.168.1.20:11434/v1")
    assert "192.168.1.20:11434 is not a public address the platform can reach." in html
    assert "EGRESS_PORTS" in html and "DEV_ALLOW_PRIVATE_EGRESS=true" in html
    assert KEY not in html  # not even in a form that failed


def test_speech_keys(owner: Tenant, owner_client: Client) -> None:
    url = page(owner, "provider-speech", "elevenlabs")
    html = owner_client.post(url, {"api_key": ""}, follow=True).content.decode()
    assert "Enter the provider" in html
    owner_client.post(url, {"api_key": KEY})
    row = ProviderCredential.objects.get(workspace=owner.workspace, kind="elevenlabs")
    listing = owner_client.get(page(owner, "providers")).content.decode()
    assert "this workspace's key" in listing and KEY not in listing
    orpheus = owner_client.post(
        page(owner, "provider-speech", "orpheus"),
        {"url": "https://model.example.com/ws", "api_key": KEY},
    ).content.decode()
    assert "must start with wss:// or ws://" in orpheus
    assert owner_client.get(page(owner, "provider-speech", "nope")).status_code == 404
    owner_client.post(page(owner, "provider-delete", row.pk))
    assert not ProviderCredential.objects.exists()


def test_members_see_but_do_not_change(
    owner: Tenant, member: Tenant, member_client: Client
) -> None:
    credentials.provider_llm_set(
        workspace=owner.workspace, name="openai", base_url="https://api.openai.com/v1",
        model="gpt-4o-mini", api_key=KEY,
    )  # fmt: skip
    row = ProviderCredential.objects.get()
    html = member_client.get(page(owner, "providers")).content.decode()
    assert "openai" in html and KEY not in html and "Only owners and admins" in html
    assert member_client.get(page(owner, "provider-llm-new")).status_code == 403
    assert member_client.post(page(owner, "provider-test", row.pk)).status_code == 403
    assert member_client.post(page(owner, "provider-delete", row.pk)).status_code == 403


def test_the_outsider_sees_nothing(owner: Tenant, outsider_client: Client) -> None:
    credentials.provider_speech_set(workspace=owner.workspace, kind="assemblyai", api_key=KEY)
    row = ProviderCredential.objects.get()
    for url in (
        page(owner, "providers"),
        page(owner, "provider-llm", row.pk),
        page(owner, "provider-speech", "assemblyai"),
        page(owner, "provider-delete", row.pk),
    ):
        assert outsider_client.get(url).status_code == 404
    assert outsider_client.post(page(owner, "provider-test", row.pk)).status_code == 404
    assert ProviderCredential.objects.filter(pk=row.pk).exists()


def test_an_agent_chooses_among_the_workspaces_connections(
    owner: Tenant, owner_client: Client
) -> None:
    for name in ("openai", "local"):
        credentials.provider_llm_set(
            workspace=owner.workspace, name=name, base_url="https://api.example.com/v1",
            model="m",
        )  # fmt: skip
    credentials.provider_speech_set(workspace=owner.workspace, kind="elevenlabs", api_key=KEY)
    html = owner_client.get(page(owner, "agent-new")).content.decode()
    assert "Workspace default (openai)" in html and '<option value="local">' in html
    assert "ElevenLabs (this workspace&#x27;s key)" in html and KEY not in html


# ---------------------------------------------------------------- the audit log


def _events(tenant: Tenant, prefix: str) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.filter(workspace=tenant.workspace, action__startswith=prefix).order_by(
            "pk"
        )
    )


def test_provider_accounts_and_their_tests_are_audited_without_keys(
    owner: Tenant, settings
) -> None:
    """Who added, changed, tested and deleted which account, from where; never a key (the
    URL without its query, where keys sometimes ride)."""
    client = Client(REMOTE_ADDR="203.0.113.9")
    client.force_login(owner.user)
    _add(client, owner, base_url="https://api.example.com/v1?api_key=" + KEY)
    row = ProviderCredential.objects.get(workspace=owner.workspace)
    client.post(
        page(owner, "provider-llm", row.pk),
        {"base_url": "https://api.example.com/v2", "model": "gpt-4o", "api_key": KEY + "2"},
    )
    client.post(page(owner, "provider-speech", "elevenlabs"), {"api_key": KEY})
    # "Test connection" to a port where nothing listens (allowed here: a local address).
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    ProviderCredential.objects.filter(pk=row.pk).update(base_url="http://127.0.0.1:9/v1")
    tested = client.post(page(owner, "provider-test", row.pk), follow=True).content.decode()
    assert "could not connect" in tested
    client.post(page(owner, "provider-delete", row.pk))
    events = _events(owner, "provider.")
    assert [(e.action, e.target) for e in events] == [
        ("provider.created", "LLM connection openai"),
        ("provider.updated", "LLM connection openai"),
        ("provider.created", "ElevenLabs text-to-speech"),
        ("provider.tested", "LLM connection openai"),
        ("provider.deleted", "LLM connection openai"),
    ]
    assert events[0].details["url"] == "https://api.example.com/v1"
    assert events[1].details == {
        "url": "https://api.example.com/v2", "model": "gpt-4o", "key_saved": True
    }  # fmt: skip
    assert events[3].details["ok"] is False and events[3].details["url"] == "http://127.0.0.1:9/v1"
    for event in events:
        assert (event.actor_user, event.address) == (owner.user, "203.0.113.9")
        assert KEY not in str(event.details) + event.target


def test_a_local_ollama_as_the_help_suggests_is_saved_on_a_development_machine(
    owner: Tenant, owner_client: Client, settings
) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = False
    refused = _add(owner_client, owner, base_url="http://localhost:11434/v1", name="ollama")
    assert "localhost:11434 is not a public address the platform can reach." in refused
    assert "DEV_ALLOW_PRIVATE_EGRESS=true allows any address and port" in refused
    settings.DEV_ALLOW_PRIVATE_EGRESS = True  # as ./dev.sh runs
    form = owner_client.get(page(owner, "provider-llm-new")).content.decode()
    assert "Ollama http://localhost:11434/v1" in form and "any address and port" in form
    saved = _add(owner_client, owner, base_url="http://localhost:11434/v1", name="ollama")
    assert "LLM connection ollama saved" in saved


def test_the_page_names_the_platforms_model_and_where_no_key_is(
    owner: Tenant, owner_client: Client, settings
) -> None:
    settings.LLM_BASE_URL = "http://127.0.0.1:11434/v1"
    settings.LLM_MODEL = "llama3.2"
    settings.LLM_API_KEY = "sk-platform-never-shown"
    settings.ELEVENLABS_API_KEY = ""
    html = owner_client.get(page(owner, "providers")).content.decode()
    assert 'the platform\'s language model, <code class="mono">llama3.2</code> at ' in html
    assert '<span class="mono">127.0.0.1</span>' in html and "sk-platform" not in html
    row = html[html.index("ElevenLabs") :].split("</tr>")[0]
    assert "no key (neither the workspace's nor the platform's)" in row
    assert "not available" not in html
