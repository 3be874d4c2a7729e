"""Phone housekeeping (Celery beat): a call whose stream never came is closed once no token
could open it, and expired session tokens are forgotten; a live call is left alone."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from sessions_app import services as agent_services
from sessions_app.models import SessionToken
from telephony_app import calls, links, tasks
from telephony_app.models import PhoneCall
from tests.factories import Tenant, phone_line
from tests.telephony_app.carrier import twilio_post, twilio_voice_form

pytestmark = pytest.mark.django_db
PUBLIC = "https://voice.example.com"


def test_calls_that_never_streamed_are_closed_and_old_tokens_forgotten(
    owner: Tenant, settings: Any
) -> None:
    settings.PUBLIC_URL = PUBLIC
    agent_services.agent_create(workspace=owner.workspace, name="Support", slug="support")
    _, phone = phone_line(owner.workspace, "support")
    url = links.voice_webhook_url(phone, PUBLIC)
    for sid in ("CA-gone", "CA-live", "CA-new"):
        assert twilio_post(Client(), url, twilio_voice_form(sid)).status_code == 200
    long_ago = timezone.now() - timedelta(days=2)
    PhoneCall.objects.filter(call_sid__in=["CA-gone", "CA-live"]).update(started_at=long_ago)
    live = PhoneCall.objects.get(call_sid="CA-live")
    assert calls.stream_claim(carrier="twilio", call_id="CA-live", token="") is None
    PhoneCall.objects.filter(pk=live.pk).update(answered_at=long_ago, status="in-progress")
    SessionToken.objects.filter(pk=SessionToken.objects.order_by("pk").first().pk).update(
        expires_at=long_ago
    )
    tasks.housekeeping_run()
    states = dict(PhoneCall.objects.values_list("call_sid", "status"))
    assert states == {"CA-gone": "no-stream", "CA-live": "in-progress", "CA-new": "ringing"}
    assert PhoneCall.objects.get(call_sid="CA-gone").ended_at is not None
    assert SessionToken.objects.count() == 2  # the fresh calls' tokens are kept


def test_beat_runs_it_beside_the_retention_purge() -> None:
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert tasks.HOUSEKEEPING_TASK in scheduled
    assert settings.CELERY_TASK_ROUTES[tasks.HOUSEKEEPING_TASK] == {"queue": "postcall"}
