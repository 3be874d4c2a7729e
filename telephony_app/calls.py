"""A call's life on the platform side: answered (a signed webhook), its stream claimed by
the media-stream door, its end. The conversation itself is a realtime session."""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from twilio.twiml.voice_response import Connect, Stream, VoiceResponse

from core import rates
from secrets_app import crypto
from sessions_app import services as session_services
from sessions_app.models import Agent, Session
from telephony_app.carrier_events import CallEvent
from telephony_app.models import CarrierAccount, PhoneCall, PhoneNumber
from telephony_app.services import number_masked

logger = logging.getLogger(__name__)


class CallRefused(Exception):
    """The webhook repeats a call already answered (a replay), or the number cannot answer."""


def caller_address() -> str:
    """What the per-address session limits count a call as: the call itself. Caller ID is
    not authentication (every withheld number arrives as ``anonymous``, and any number can
    be spoofed), so three calls naming a number must not shut out the real owner of that
    number; a flood of calls is bounded by the number's line key and the workspace's
    limits instead. No phone number is kept in Redis keys."""
    return "tel-" + secrets.token_hex(12)


def call_open(
    *, phone: PhoneNumber, call_sid: str, direction: str, other_end: str,
    variables: dict[str, str], ttl_s: int, agent: Agent | None = None,
) -> tuple[PhoneCall, str]:  # fmt: skip
    """The call's row and the single-use token its media stream must present (minted by
    the number's line key, for ``agent`` or the number's). ``CallRefused`` for a call seen
    before."""
    try:
        with transaction.atomic():
            call = PhoneCall.objects.create(
                workspace=phone.workspace, number=phone, direction=direction,
                carrier=phone.account.carrier, call_sid=call_sid, caller=other_end[:32],
            )  # fmt: skip
            _, plaintext = session_services.session_token_create(
                workspace=phone.workspace,
                agent=agent or phone.agent,
                agent_version=None if agent else phone.agent_version,
                created_by_key=phone.line_key,
                variables=variables,
                end_user=other_end[:32],
                ttl_s=ttl_s,
            )
            call.stream_token_digest = crypto.token_digest(plaintext)
            call.save(update_fields=["stream_token_digest"])
    except IntegrityError:
        raise CallRefused("this call was answered already") from None
    return call, plaintext


def inbound_call_answer(
    *, phone: PhoneNumber, call_sid: str, caller: str, called: str, stream_url: str
) -> str:
    """The markup (TwiML, or Telnyx's TeXML) that connects the call to our media stream,
    with a single-use token for this call only. ``CallRefused`` for a call seen before."""
    if not call_sid or len(call_sid) > 128:
        raise CallRefused("no call id")
    _, token = call_open(
        phone=phone, call_sid=call_sid, direction=PhoneCall.Direction.INBOUND, other_end=caller,
        variables={"caller": caller[:32], "called": called[:32]},
        ttl_s=settings.PHONE_STREAM_TOKEN_TTL_S,
    )  # fmt: skip
    logger.info(
        "phone call answered: workspace=%s number=%s caller=%s",
        phone.workspace_id, number_masked(phone.number), number_masked(caller),
    )  # fmt: skip
    return stream_markup(phone.account.carrier, stream_url, token)


def inbound_rate() -> rates.Rate:
    return rates.Rate("phone-inbound", settings.INBOUND_CALLS_PER_MINUTE, 60)


def busy_markup() -> str:
    """The answer to a call over the number's rate: rejected as busy, nothing started."""
    response = VoiceResponse()
    response.reject(reason="busy")
    return str(response)


def stream_markup(carrier: str, stream_url: str, token: str) -> str:
    """``<Connect><Stream>``: Twilio takes no query string in a stream URL, so the token
    travels as a custom parameter (it arrives in the stream's ``start`` message)."""
    extra = {}
    if carrier == CarrierAccount.Carrier.TELNYX:
        extra = {"bidirectionalMode": "rtp", "bidirectionalCodec": "PCMU"}
    stream = Stream(url=stream_url, **extra)
    stream.parameter(name="token", value=token)
    connect = Connect()
    connect.append(stream)
    response = VoiceResponse()
    response.append(connect)
    return str(response)


def stream_claim(*, carrier: str, call_id: str, token: str) -> PhoneCall | None:
    """The call a media stream carries, if its token is the one minted for that call (and
    the stream names that call, where the carrier says which: Twilio does)."""
    if not token or len(call_id) > 128 or len(token) > 256:
        return None
    found = PhoneCall.objects.filter(
        carrier=carrier, stream_token_digest=crypto.token_digest(token), ended_at__isnull=True
    )
    if carrier == CarrierAccount.Carrier.TWILIO:
        found = found.filter(call_sid=call_id)
    call = found.first()
    if call is None:
        return None
    # Claimed once: a second stream presenting the token of a live call gets nothing (and
    # cannot end that call's record when it closes).
    claimed = PhoneCall.objects.filter(pk=call.pk, answered_at__isnull=True).update(
        answered_at=timezone.now(), status="in-progress"
    )
    return call if claimed else None


def call_started(*, call: PhoneCall, session_id: str) -> None:
    PhoneCall.objects.filter(pk=call.pk).update(session_id=session_id)


def call_on_line_ms(*, workspace_id: int, session: Session) -> int | None:
    """How long the session has been on its phone call (None: it is not a phone call's)."""
    answered_at = (
        PhoneCall.objects.filter(
            workspace_id=workspace_id,
            session_id__in=(session.public_id.hex, str(session.public_id)),
        )
        .values_list("answered_at", flat=True)
        .first()
    )
    if answered_at is None:
        return None
    return max(0, int((timezone.now() - answered_at).total_seconds() * 1000))


def call_ended(*, call: PhoneCall, duration_ms: int) -> None:
    PhoneCall.objects.filter(pk=call.pk, ended_at__isnull=True).update(
        ended_at=timezone.now(), duration_ms=duration_ms, status="completed"
    )


# What the carrier's status callbacks say, in Twilio's words; the last ones end the call.
ENDING_STATUSES = {"completed", "busy", "no-answer", "failed", "canceled"}
STATUS_ORDER = {"queued": 0, "initiated": 1, "ringing": 2, "answered": 3, "in-progress": 3}


def call_status_record(*, phone: PhoneNumber, event: CallEvent) -> PhoneCall | None:
    """One status callback of a call placed from ``phone``; None: no such call.

    A call's statuses only move forward and each is recorded once: a callback repeated
    (the carrier's retry, or a signed request captured and replayed) changes nothing, and
    nothing comes after an ending status. The duration is the carrier's (Twilio says it),
    else the time since the call's stream was claimed."""
    status = event.status
    with transaction.atomic():
        call = (
            PhoneCall.objects.select_for_update()
            .filter(number=phone, carrier=phone.account.carrier, call_sid=event.call_id)
            .first()
        )
        if call is None:
            return None
        now = timezone.now()
        if event.answered_by:
            call.answered_by = event.answered_by
        if status and _status_moves_on(call, status):
            call.statuses = [*call.statuses, {"status": status, "at": now.isoformat()}]
            call.status = status
            if status in ENDING_STATUSES and call.ended_at is None:
                call.ended_at = now
                if event.duration_s.isdigit():
                    call.duration_ms = int(event.duration_s) * 1000
                elif call.answered_at is not None:
                    call.duration_ms = int((now - call.answered_at).total_seconds() * 1000)
        call.save()
    return call


def _status_moves_on(call: PhoneCall, status: str) -> bool:
    recorded = [entry.get("status") for entry in call.statuses if "status" in entry]
    seen = set(recorded)
    if status in seen or seen & ENDING_STATUSES or len(recorded) >= len(STATUS_ORDER) + 1:
        return False
    if status in ENDING_STATUSES:
        return True
    if call.ended_at is not None:  # the stream ended it first: a late one is history
        return False
    reached = max((STATUS_ORDER.get(str(each), -1) for each in seen), default=-1)
    return STATUS_ORDER.get(status, -1) > reached


def calls_unconnected_close(*, older_than: timedelta) -> int:
    """Calls whose webhook was answered but whose stream never came (the caller hung up
    while ringing, or a webhook was signed and no call followed): closed as ``no-stream``
    once their token can no longer open one, so nothing stays "ringing" for good."""
    cutoff = timezone.now() - older_than
    return PhoneCall.objects.filter(
        answered_at__isnull=True, ended_at__isnull=True, started_at__lt=cutoff
    ).update(ended_at=timezone.now(), status="no-stream")


def call_step_claim(*, call: PhoneCall, step: str) -> bool:
    """Note ``step`` (``voicemail``, ``hung-up``) in the call's statuses, once: False if it
    was noted before (a repeated or replayed callback must not leave the message twice)."""
    with transaction.atomic():
        row = PhoneCall.objects.select_for_update().get(pk=call.pk, workspace_id=call.workspace_id)
        if any(entry.get("step") == step for entry in row.statuses):
            return False
        row.statuses = [*row.statuses, {"step": step, "at": timezone.now().isoformat()}]
        row.save(update_fields=["statuses"])
    return True
