"""The Phone page: an account and a number added through the forms, the webhook URL to
paste (from PUBLIC_URL), the credential never shown, members read-only, outsiders out."""

from __future__ import annotations

from typing import Any

from django.test import Client

from sessions_app import services as agent_services
from telephony_app.models import PhoneCall, PhoneNumber
from tests.factories import TWILIO_SID, TWILIO_TOKEN, Tenant, phone_line
from tests.fakes.twilio_rest import FakeTwilioRest
from tests.frontend.dashboard.conftest import page


def test_an_owner_adds_an_account_and_a_number_and_sees_the_url(
    owner: Tenant, owner_client: Client, settings: Any
) -> None:
    settings.PUBLIC_URL = "https://voice.example.com"
    agent_services.agent_create(workspace=owner.workspace, name="Support", slug="support")
    account = {
        "carrier": "twilio", "name": "Main", "account_sid": TWILIO_SID,
        "credential": TWILIO_TOKEN,
    }  # fmt: skip
    answer = owner_client.post(page(owner, "phone-account-new"), account)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    refused = owner_client.post(
        page(owner, "phone-number-new"),
        {"account": "Main", "number": "415-555", "agent": "support"},
    )
    assert "E.164" in refused.content.decode()
    owner_client.post(
        page(owner, "phone-number-new"),
        {"account": "Main", "number": "+14155550123", "agent": "support"},
    )
    phone = PhoneNumber.objects.get(workspace=owner.workspace)
    html = owner_client.get(page(owner, "phone")).content.decode()
    assert f"https://voice.example.com/phone/twilio/{phone.uid}/voice" in html
    assert "+14155550123" in html and TWILIO_TOKEN not in html
    PhoneCall.objects.create(
        workspace=owner.workspace, number=phone, direction="inbound", carrier="twilio",
        call_sid="CA1", caller="+447700900123", status="completed", duration_ms=61_500,
    )  # fmt: skip
    html = owner_client.get(page(owner, "phone")).content.decode()
    assert "+447700900123" in html and "61 s" in html
    assert "<title>Phone · Voice agents</title>" in html  # the calls table is in the page once
    assert html.count("+447700900123") == 1


def test_members_read_and_outsiders_see_nothing(
    owner: Tenant, member_client: Client, outsider_client: Client
) -> None:
    agent_services.agent_create(workspace=owner.workspace, name="Support", slug="support")
    _, phone = phone_line(owner.workspace, "support")
    html = member_client.get(page(owner, "phone")).content.decode()
    assert phone.number in html and "Add number" not in html
    assert member_client.get(page(owner, "phone-number-delete", phone.pk)).status_code == 403
    PhoneCall.objects.create(
        workspace=owner.workspace, number=phone, direction="inbound", carrier="twilio",
        call_sid="CA2", caller="+447700900999",
    )  # fmt: skip
    assert "+447700900999" in member_client.get(page(owner, "phone")).content.decode()
    assert outsider_client.get(page(owner, "phone")).status_code in (403, 404)
    assert outsider_client.post(page(owner, "phone-number-delete", phone.pk)).status_code in (
        403, 404,
    )  # fmt: skip
    assert PhoneNumber.objects.filter(pk=phone.pk).exists()


def test_an_owner_places_a_call_and_sets_what_machines_get(
    owner: Tenant, owner_client: Client, member_client: Client, outsider_client: Client,
    settings: Any,
) -> None:  # fmt: skip
    agent_services.agent_create(workspace=owner.workspace, name="Sales", slug="sales")
    _, phone = phone_line(owner.workspace, "sales")
    settings.PUBLIC_URL = "https://voice.example.com"
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    message = "Hi, this is Acme. Please call us back."
    with FakeTwilioRest(auth_token=TWILIO_TOKEN) as twilio:
        settings.TWILIO_API_URL = twilio.url
        edit = page(owner, "phone-call-settings", "sales")
        no_message = owner_client.post(edit, {"machine_detection": "leave_message"})
        assert "say what the message is" in no_message.content.decode()
        saved = owner_client.post(
            edit, {"machine_detection": "leave_message", "voicemail_message": message}
        )
        assert saved.status_code == 302
        html = owner_client.get(page(owner, "phone")).content.decode()
        assert "Leave the voicemail message, then hang up" in html

        call = {"from_number": phone.number, "to": "+12125550123", "variables": "order=A-1042"}
        assert member_client.post(page(owner, "phone-call-new"), call).status_code == 403
        assert outsider_client.post(page(owner, "phone-call-new"), call).status_code in (403, 404)
        assert not twilio.requests
        placed = owner_client.post(page(owner, "phone-call-new"), call)
        assert placed.status_code == 302, placed.content.decode()[:2000]
        (sent,) = twilio.requests
        assert sent.value("To") == "+12125550123"
        assert sent.value("MachineDetection") == "DetectMessageEnd"
        html = owner_client.get(page(owner, "phone")).content.decode()
        assert "outbound" in html and "+12125550123" in html

        twilio.fail_with = 400
        refused = owner_client.post(page(owner, "phone-call-new"), call)
        text = refused.content.decode()
        assert "Twilio refused the request" in text and "unverified" not in text
