"""The voice webhook: a signed call is answered with <Connect><Stream> and a token for
that call only; unsigned, forged, replayed, stale or misdirected ones get a bare 403 and
start nothing."""

from __future__ import annotations

import concurrent.futures
import json
import re
from typing import Any
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.test import Client

from sessions_app import services as agent_services
from sessions_app.models import SessionToken
from telephony_app import links, services
from telephony_app.models import PhoneCall
from tests.factories import TWILIO_SID, Tenant, phone_line
from tests.telephony_app.carrier import TelnyxSigner, twilio_post, twilio_voice_form

PUBLIC = "https://voice.example.com"


@pytest.fixture
def line(owner: Tenant, settings: Any) -> Any:
    settings.PUBLIC_URL = PUBLIC
    agent_services.agent_create(workspace=owner.workspace, name="Support", slug="support")
    _, phone = phone_line(owner.workspace, "support")
    return phone


def test_a_signed_twilio_call_is_connected_to_the_stream(line: Any) -> None:
    url = links.voice_webhook_url(line, PUBLIC)
    answer = twilio_post(Client(), url, twilio_voice_form("CA1"))
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("text/xml")
    twiml = answer.content.decode()
    assert '<Connect><Stream url="wss://voice.example.com/phone/twilio/stream">' in twiml
    token = re.search(r'<Parameter name="token" value="(st_[^"]+)"', twiml)
    assert token is not None
    minted = SessionToken.objects.get()
    assert minted.agent == line.agent and minted.created_by_key == line.line_key
    assert minted.variables == {"caller": "+447700900123", "called": "+14155550100"}
    call = PhoneCall.objects.get()
    assert call.workspace == line.workspace and call.caller == "+447700900123"


def test_forged_unsigned_replayed_and_misdirected_webhooks_start_nothing(
    line: Any, outsider: Tenant
) -> None:
    client, url = Client(), links.voice_webhook_url(line, PUBLIC)
    form = twilio_voice_form("CA2")
    assert twilio_post(client, url, form, token="not-the-auth-token").status_code == 403
    unsigned = client.post(
        url.removeprefix(PUBLIC), urlencode(form), content_type="application/x-www-form-urlencoded"
    )
    assert unsigned.status_code == 403
    # Signed for another URL (another number's), or with another account's SID.
    other = url.replace(line.uid, "x" * 24)
    assert twilio_post(client, other, form).status_code == 403
    assert twilio_post(client, url, {**form, "AccountSid": "AC" + "f" * 32}).status_code == 403
    assert not PhoneCall.objects.exists() and not SessionToken.objects.exists()
    assert twilio_post(client, url, form).status_code == 200
    assert twilio_post(client, url, form).status_code == 403  # the same call, replayed
    assert SessionToken.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_replays_at_once_answer_one_call(line: Any) -> None:
    url, form = links.voice_webhook_url(line, PUBLIC), twilio_voice_form("CA3")

    def post() -> int:
        try:
            return int(twilio_post(Client(), url, form).status_code)
        finally:
            connection.close()

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        statuses = sorted(pool.map(lambda _: post(), range(6)))
    assert statuses.count(200) == 1 and statuses.count(403) == 5
    assert SessionToken.objects.count() == 1


def test_another_workspaces_number_is_unreachable(line: Any, outsider: Tenant) -> None:
    """The outsider's own Twilio account (another token) signs a call to the owner's URL."""
    services.carrier_account_create(
        workspace=outsider.workspace, carrier="twilio", name="Theirs",
        account_sid=TWILIO_SID, credential="the-outsiders-token",
    )  # fmt: skip
    url = links.voice_webhook_url(line, PUBLIC)
    answer = twilio_post(Client(), url, twilio_voice_form("CA4"), token="the-outsiders-token")
    assert answer.status_code == 403 and not PhoneCall.objects.exists()


def test_telnyx_signatures_are_checked_with_a_tolerance(owner: Tenant, settings: Any) -> None:
    import time

    settings.PUBLIC_URL = PUBLIC
    agent_services.agent_create(workspace=owner.workspace, name="Support", slug="support")
    signer = TelnyxSigner()
    services.carrier_account_create(
        workspace=owner.workspace, carrier="telnyx", name="Tx", credential="KEY_telnyx",
        public_key=signer.public_key,
    )  # fmt: skip
    phone = services.phone_number_create(
        workspace=owner.workspace, account="Tx", number="+14155550111", agent="support"
    )
    path = links.voice_webhook_url(phone, PUBLIC).removeprefix(PUBLIC)
    body = json.dumps({"CallSid": "v3:abc", "From": "+15550001", "To": "+14155550111"}).encode()

    def post(headers: dict[str, str], data: bytes = body) -> int:
        answer = Client().post(path, data, content_type="application/json", headers=headers)
        return int(answer.status_code)

    assert post(signer.headers(body, at=time.time() - 600)) == 403  # stale
    assert post(TelnyxSigner().headers(body)) == 403  # another key
    assert post(signer.headers(body), data=body.replace(b"+1555", b"+1666")) == 403  # altered
    ok = Client().post(path, body, content_type="application/json", headers=signer.headers(body))
    assert ok.status_code == 200
    assert 'bidirectionalMode="rtp"' in ok.content.decode()
    assert post(signer.headers(body)) == 403  # replayed
    # Telnyx signs the body, not the URL: a body signed for this number, posted to another
    # number registered with the same key, starts nothing there.
    other = services.phone_number_create(
        workspace=owner.workspace, account="Tx", number="+14155550112", agent="support"
    )
    elsewhere = links.voice_webhook_url(other, PUBLIC).removeprefix(PUBLIC)
    fresh = body.replace(b"v3:abc", b"v3:def")
    moved = Client().post(
        elsewhere, fresh, content_type="application/json", headers=signer.headers(fresh)
    )
    assert moved.status_code == 403
    assert post(signer.headers(fresh), data=fresh) == 200  # where it was meant for


def test_a_number_turns_calls_away_as_busy_over_its_rate(line: Any, settings: Any) -> None:
    settings.INBOUND_CALLS_PER_MINUTE = 2
    url = links.voice_webhook_url(line, PUBLIC)
    answers = [
        twilio_post(Client(), url, twilio_voice_form(f"CA{n}")).content.decode() for n in range(3)
    ]
    assert all("<Stream" in answer for answer in answers[:2])
    assert '<Reject reason="busy"' in answers[2] and "<Stream" not in answers[2]
    assert PhoneCall.objects.count() == 2
