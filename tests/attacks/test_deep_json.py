"""JSON nested past Python's stack, from everywhere the platform reads JSON it did not
write: a phone webhook (public, read before its signature can be checked), and the answers
of speech providers and carriers. ``json.loads`` raises RecursionError, not ValueError, on
it: each of these read it as the platform's own failure (a 500 and a traceback for the
webhook; an internal error instead of the provider's for the others). Now each is what any
other unreadable body is."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from engine.providers.base import ProviderError
from engine.providers.stt.assemblyai import adapter as assemblyai
from engine.providers.tts.elevenlabs import adapter as elevenlabs
from engine.providers.tts.openai import adapter as openai_tts
from sessions_app import services as agent_services
from telephony_app import carrier_events, links
from telephony_app.models import PhoneCall
from tests.factories import Tenant, phone_line

DEEP = "[" * 100_000 + "]" * 100_000  # 200 KB: within every body limit


def test_a_phone_webhook_with_a_deep_json_body_is_refused_like_any_unsigned_one(
    owner: Tenant, settings: Any
) -> None:
    settings.PUBLIC_URL = "https://voice.example.com"
    agent_services.agent_create(workspace=owner.workspace, name="Support", slug="support")
    _, line = phone_line(owner.workspace, "support")
    url = links.voice_webhook_url(line, settings.PUBLIC_URL).removeprefix(settings.PUBLIC_URL)
    answer = Client(raise_request_exception=False).post(
        url, '{"CallSid": ' + DEEP + "}", content_type="application/json"
    )
    assert answer.status_code == 403
    assert not PhoneCall.objects.exists()


def test_a_carriers_deep_event_is_not_a_call_event() -> None:
    assert carrier_events.telnyx_event(('{"data": ' + DEEP + "}").encode()) is None


def test_a_speech_providers_deep_answers_are_the_providers_failure() -> None:
    assert openai_tts._error_detail(('{"error": ' + DEEP + "}").encode(), secrets=()) == ""
    assert assemblyai._json_object('{"type": ' + DEEP + "}") == {}
    with pytest.raises(ProviderError, match="not valid JSON"):
        elevenlabs._parse('{"audio": ' + DEEP + "}", secrets=())
