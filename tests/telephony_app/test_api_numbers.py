"""Carrier accounts and numbers over the REST API: sealed credentials, validated numbers,
the webhook URL to paste, audit events, the scope, and the outsider who sees nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client as DjangoClient

from secrets_app import services as key_services
from secrets_app.models import ApiKey, AuditEvent
from sessions_app import services as agent_services
from telephony_app import services
from telephony_app.models import CarrierAccount, PhoneNumber
from tests.conftest import api_client
from tests.factories import TWILIO_SID, TWILIO_TOKEN, Tenant, phone_line

TELNYX_PUBLIC_KEY = "MCowBQYDK2VwAyEA" + "A" * 28  # 44 base64 characters


@pytest.fixture
def agent(owner: Tenant) -> Any:
    return agent_services.agent_create(workspace=owner.workspace, name="Support", slug="support")


def _twilio(api: Any, **extra: Any) -> Any:
    body = {
        "carrier": "twilio",
        "name": "Main",
        "account_sid": TWILIO_SID,
        "credential": TWILIO_TOKEN,
        **extra,
    }
    return api.post("/api/v1/carrier-accounts", body, format="json")


def test_a_twilio_account_is_sealed_and_never_shown(owner: Tenant, owner_api: Any) -> None:
    answer = _twilio(owner_api)
    assert answer.status_code == 201, answer.content
    assert TWILIO_TOKEN not in answer.content.decode()
    assert answer.json()["credential_last4"] == TWILIO_TOKEN[-4:]
    account = CarrierAccount.objects.get(workspace=owner.workspace)
    assert TWILIO_TOKEN.encode() not in bytes(account.ciphertext)
    assert services.carrier_credential(account) == TWILIO_TOKEN
    listed = owner_api.get("/api/v1/carrier-accounts").content.decode()
    assert TWILIO_TOKEN not in listed and "Main" in listed
    assert AuditEvent.objects.filter(
        workspace=owner.workspace, action="carrier_account.created"
    ).exists()


def test_account_fields_are_checked(owner_api: Any) -> None:
    assert _twilio(owner_api, account_sid="AC123").status_code == 400
    telnyx = {"carrier": "telnyx", "name": "T", "credential": "KEY", "public_key": "bm9wZQ=="}
    bad = owner_api.post("/api/v1/carrier-accounts", telnyx, format="json")
    assert bad.status_code == 400 and "public_key" in bad.json()["error"]["fields"]
    telnyx["public_key"] = "A" * 43 + "="
    assert owner_api.post("/api/v1/carrier-accounts", telnyx, format="json").status_code == 201
    assert _twilio(owner_api).status_code == 201
    assert _twilio(owner_api).status_code == 400  # the name is taken


def test_a_number_shows_its_webhook_url_and_gets_a_line_key(
    owner: Tenant, owner_api: Any, agent: Any, settings: Any
) -> None:
    settings.PUBLIC_URL = "https://voice.example.com"
    _twilio(owner_api)
    body = {"account": "Main", "number": "+1 (415) 555-0123", "agent": "support"}
    answer = owner_api.post("/api/v1/phone-numbers", body, format="json")
    assert answer.status_code == 201, answer.content
    phone = PhoneNumber.objects.get(workspace=owner.workspace)
    assert answer.json()["number"] == "+14155550123"
    assert answer.json()["voice_webhook_url"] == (
        f"https://voice.example.com/phone/twilio/{phone.uid}/voice"
    )
    assert phone.line_key.tokens_only and phone.line_key.kind == ApiKey.Kind.PUBLISHABLE
    assert phone.line_key.allowed_agents == ["support"]
    again = owner_api.post("/api/v1/phone-numbers", body, format="json")
    assert again.status_code == 400
    for number in ("4155550123", "+0123456789", "+1415555012345678", "+1 415 CALL NOW"):
        refused = owner_api.post("/api/v1/phone-numbers", {**body, "number": number}, format="json")
        assert refused.status_code == 400, number
        assert "E.164" in refused.json()["error"]["message"]
    deleted = owner_api.delete(f"/api/v1/phone-numbers/{phone.pk}")
    assert deleted.status_code == 204
    phone.line_key.refresh_from_db()
    assert phone.line_key.revoked_at is not None
    actions = set(
        AuditEvent.objects.filter(workspace=owner.workspace).values_list("action", flat=True)
    )
    assert {"phone_number.created", "phone_number.deleted"} <= actions


def test_an_account_with_numbers_is_not_deleted(owner: Tenant, owner_api: Any, agent: Any) -> None:
    account, _ = phone_line(owner.workspace, "support")
    assert owner_api.delete(f"/api/v1/carrier-accounts/{account.pk}").status_code == 400
    assert CarrierAccount.objects.filter(pk=account.pk).exists()


def test_the_outsider_sees_and_touches_nothing(
    owner: Tenant, outsider: Tenant, outsider_api: Any, agent: Any
) -> None:
    account, phone = phone_line(owner.workspace, "support")
    assert outsider_api.get("/api/v1/carrier-accounts").json() == []
    assert outsider_api.get("/api/v1/phone-numbers").json() == []
    for path in (f"carrier-accounts/{account.pk}", f"phone-numbers/{phone.pk}"):
        assert outsider_api.get(f"/api/v1/{path}").status_code == 404
        assert outsider_api.patch(f"/api/v1/{path}", {}, format="json").status_code == 404
        assert outsider_api.delete(f"/api/v1/{path}").status_code == 404
    agent_services.agent_create(workspace=outsider.workspace, name="S", slug="support")
    # The owner's account name means nothing in the outsider's workspace.
    body = {"account": "Main Twilio", "number": "+14155550100", "agent": "support"}
    assert outsider_api.post("/api/v1/phone-numbers", body, format="json").status_code == 400
    assert PhoneNumber.objects.filter(workspace=outsider.workspace).count() == 0


def _key(tenant: Tenant, *scopes: str) -> Any:
    _, plaintext = key_services.api_key_create(
        workspace=tenant.workspace, kind=ApiKey.Kind.SECRET, label="narrow", scopes=list(scopes)
    )
    return api_client(plaintext)


def test_a_phone_write_key_adds_and_removes_a_number_without_the_keys_scope(
    owner: Tenant, agent: Any
) -> None:
    """The number's own key comes and goes with it; the key that added the number is not
    its maker, so revoking that key leaves the line answering."""
    phone_key = _key(owner, "phone:write")
    assert _twilio(phone_key).status_code == 201
    body = {"account": "Main", "number": "+14155550100", "agent": "support"}
    made = phone_key.post("/api/v1/phone-numbers", body, format="json")
    assert made.status_code == 201, made.content
    phone = PhoneNumber.objects.get(workspace=owner.workspace)
    assert phone.line_key.created_by_key is None
    created = AuditEvent.objects.get(target=phone.line_key.display, action="key.created")
    assert created.actor_label.startswith("API key ")  # who added the number, not "system"
    assert phone_key.delete(f"/api/v1/phone-numbers/{phone.pk}").status_code == 204
    phone.line_key.refresh_from_db()
    assert phone.line_key.revoked_at is not None
    revoked = AuditEvent.objects.get(target=phone.line_key.display, action="key.revoked")
    assert revoked.actor_label == created.actor_label


def test_an_agent_that_answers_numbers_is_not_deleted(
    owner: Tenant, member: Tenant, agent: Any
) -> None:
    """Deleting the agent would delete its numbers: neither an ``agents`` key nor a
    member (who may not manage numbers) removes them that way."""
    _, phone = phone_line(owner.workspace, "support")
    agents_only = _key(owner, "agents")
    assert agents_only.delete(f"/api/v1/phone-numbers/{phone.pk}").status_code == 403
    refused = agents_only.delete("/api/v1/agents/support")
    assert refused.status_code == 409, refused.content
    error = refused.json()["error"]
    assert error["code"] == "agent_in_use" and phone.number in error["message"]
    browser = DjangoClient()
    browser.force_login(member.user)
    page = browser.post(f"/w/{owner.workspace.pk}/agents/support/delete/", follow=True)
    assert "was not deleted" in page.content.decode()
    assert PhoneNumber.objects.filter(pk=phone.pk).exists()
    phone.line_key.refresh_from_db()
    assert phone.line_key.revoked_at is None
    assert not AuditEvent.objects.filter(action="agent.deleted").exists()
    # Moved to another agent, the first one goes.
    agent_services.agent_create(workspace=owner.workspace, name="Sales", slug="sales")
    services.phone_number_update(phone=phone, agent="sales")
    assert agents_only.delete("/api/v1/agents/support").status_code == 204


def test_a_number_is_pinned_to_a_version_of_its_agent_and_a_move_clears_the_pin(
    owner: Tenant, agent: Any
) -> None:
    from sessions_app import versions
    from sessions_app.models import SessionToken
    from telephony_app import calls

    agent_services.agent_update(agent=agent, instructions="I am Support v2.")  # version 2
    beta = agent_services.agent_create(
        workspace=owner.workspace, name="Beta", slug="beta", instructions="I am Beta."
    )
    _, phone = phone_line(owner.workspace, "support")
    url = f"/api/v1/phone-numbers/{phone.pk}"
    # The pin needs the versions scope beside phone:write.
    narrow = _key(owner, "phone:write")
    assert narrow.patch(url, {"agent_version": 1}, format="json").status_code == 403
    client = api_client(owner.secret_key)
    pinned = client.patch(url, {"agent_version": 1}, format="json")
    assert pinned.status_code == 200, pinned.content
    assert pinned.json()["agent_version"] == 1
    # Only a version of the number's own agent.
    other = client.patch(url, {"agent_version": 7}, format="json")
    assert other.status_code == 400, other.content
    # Moving the number clears the pin; its calls get the new agent's version.
    moved = client.patch(url, {"agent": "beta"}, format="json")
    assert moved.status_code == 200 and moved.json()["agent_version"] is None, moved.content
    phone.refresh_from_db()
    assert phone.agent_version is None
    calls.call_open(
        phone=phone, call_sid="CA" + "1" * 32, direction="inbound", other_end="+14155550199",
        variables={}, ttl_s=60,
    )  # fmt: skip
    token = SessionToken.objects.select_related("agent", "agent_version").latest("pk")
    served = versions.served_agent(
        agent=token.agent, session_id="s", key=None, pinned=token.agent_version
    )
    assert (token.agent.slug, served.instructions) == ("beta", "I am Beta.")
    assert beta.pk == token.agent.pk


def test_a_pinned_version_of_another_agent_is_never_served(owner: Tenant, agent: Any) -> None:
    from sessions_app import versions

    beta = agent_services.agent_create(
        workspace=owner.workspace, name="Beta", slug="beta", instructions="I am Beta."
    )
    foreign = agent.published_version
    served = versions.served_agent(agent=beta, session_id="s", key=None, pinned=foreign)
    assert served.instructions == "I am Beta."
