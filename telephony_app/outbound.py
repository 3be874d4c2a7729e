"""Outbound calls: the platform asks the carrier to ring a number; once answered, the call
is connected to our media stream like an inbound call (Twilio: the TwiML sent with the
call; Telnyx: Call Control's ``stream_url``). Rate-limited per workspace and refused once
a quota is used up. Answering-machine detection, where the agent's call settings ask for
it, is the carrier's (Twilio's asynchronous AMD, Telnyx's ``answering_machine_detection``);
what happens when a machine answers is ``machine``'s."""

from __future__ import annotations

import logging
import secrets
from urllib.parse import urlencode

from django.conf import settings
from django.core.exceptions import ValidationError

from core import rates
from secrets_app.audit import SYSTEM, Actor, audit_record
from secrets_app.models import Workspace
from telephony_app import calls, destinations, links, services, telnyx_rest, twilio_rest
from telephony_app.carrier_rest import CarrierError
from telephony_app.models import CarrierAccount, MachineAction, PhoneCall, PhoneNumber
from usage_app.quota_counters import session_start_refusal

logger = logging.getLogger(__name__)

STATUS_EVENTS = ("initiated", "ringing", "answered", "completed")
Carrier = CarrierAccount.Carrier


class CallsThrottled(Exception):
    def __init__(self, wait_s: int) -> None:
        super().__init__(f"too many calls: wait {wait_s} s")
        self.wait_s = wait_s


class QuotaExceeded(Exception):
    pass


def _outbound_rate() -> rates.Rate:
    return rates.Rate("phone-outbound", settings.OUTBOUND_CALLS_PER_MINUTE, 60)


def _number_of(workspace: Workspace, number: str) -> PhoneNumber:
    try:
        cleaned = services.validate_e164(number)
    except ValidationError as error:
        raise ValidationError({"from": error.messages}) from None
    phone = (
        PhoneNumber.objects.select_related("account", "agent", "line_key", "workspace")
        .filter(workspace=workspace, number=cleaned)
        .first()
    )
    if phone is None:
        raise ValidationError({"from": ["not one of the workspace's numbers"]})
    if phone.account.carrier == Carrier.TELNYX and not phone.account.connection_id:
        raise ValidationError(
            {"from": ["the number's Telnyx account has no Call Control application id"]}
        )
    return phone


def outbound_call_place(
    *, workspace: Workspace, from_number: str, to: str, agent: str | None = None,
    variables: dict[str, str] | None = None, base_url: str, actor: Actor = SYSTEM,
) -> PhoneCall:  # fmt: skip
    """Ring ``to`` from one of the workspace's numbers, answered by ``agent`` (a slug; by
    default the number's). ``base_url``: the platform's address as the carrier reaches it.
    ``CarrierError`` when the carrier refuses (the call's row then says failed)."""
    phone = _number_of(workspace, from_number)
    try:
        callee = services.validate_e164(to)
    except ValidationError as error:
        raise ValidationError({"to": error.messages}) from None
    destinations.destination_check(caller=phone.number, callee=callee)
    speaker = services.agent_of(workspace, agent) if agent else phone.agent
    wait_s = rates.hit_sync(_outbound_rate(), str(workspace.pk))
    if wait_s is not None:
        raise CallsThrottled(wait_s)
    exceeded = session_start_refusal(workspace_id=workspace.pk)
    if exceeded is not None:
        raise QuotaExceeded(exceeded)
    call, token = calls.call_open(
        phone=phone, call_sid=f"pending-{secrets.token_hex(12)}",
        direction=PhoneCall.Direction.OUTBOUND, other_end=callee,
        variables={**(variables or {}), "caller": phone.number, "called": callee},
        ttl_s=settings.PHONE_OUTBOUND_TOKEN_TTL_S, agent=speaker,
    )  # fmt: skip
    action, message = services.machine_setting(speaker)
    place = _place_telnyx if phone.account.carrier == Carrier.TELNYX else _place_twilio
    try:
        call_id, status = place(phone, callee, token, base_url, action)
    except CarrierError:
        PhoneCall.objects.filter(pk=call.pk).update(status="failed")
        raise
    call.call_sid, call.status = call_id[:128], status[:20]
    call.machine_action = "" if action == MachineAction.OFF else action
    call.voicemail_message = message if action == MachineAction.LEAVE_MESSAGE else ""
    call.save(update_fields=["call_sid", "status", "machine_action", "voicemail_message"])
    audit_record(
        workspace=workspace, actor=actor, action="phone_call.placed", target=phone.number,
        details={"to": services.number_masked(callee)},
    )  # fmt: skip
    logger.info(
        "phone call placed: workspace=%s carrier=%s from=%s to=%s",
        workspace.pk, phone.account.carrier, services.number_masked(phone.number),
        services.number_masked(callee),
    )  # fmt: skip
    return call


def _place_twilio(
    phone: PhoneNumber, callee: str, token: str, base_url: str, action: str
) -> tuple[str, str]:
    twiml = calls.stream_markup(phone.account.carrier, links.stream_url("twilio", base_url), token)
    form = [
        ("To", callee), ("From", phone.number), ("Twiml", twiml),
        ("StatusCallback", links.status_callback_url(phone, base_url)),
        ("StatusCallbackMethod", "POST"),
        *(("StatusCallbackEvent", event) for event in STATUS_EVENTS),
    ]  # fmt: skip
    if action != MachineAction.OFF:
        # DetectMessageEnd waits for the greeting's beep, so a message left lands on the tape.
        detect = "DetectMessageEnd" if action == MachineAction.LEAVE_MESSAGE else "Enable"
        form += [
            ("MachineDetection", detect), ("AsyncAmd", "true"),
            ("AsyncAmdStatusCallback", links.machine_callback_url(phone, base_url)),
            ("AsyncAmdStatusCallbackMethod", "POST"),
        ]  # fmt: skip
    created = twilio_rest.call_create(
        account_sid=phone.account.account_sid,
        auth_token=services.carrier_credential(phone.account),
        form=form,
    )
    return str(created["sid"]), str(created.get("status", "queued"))


def _place_telnyx(
    phone: PhoneNumber, callee: str, token: str, base_url: str, action: str
) -> tuple[str, str]:
    # Dial has no custom stream parameters: the single-use token rides in the stream URL's
    # query, which Telnyx keeps when it opens the stream.
    stream = links.stream_url("telnyx", base_url) + "?" + urlencode({"token": token})
    body: dict[str, object] = {
        "connection_id": phone.account.connection_id, "to": callee, "from": phone.number,
        "stream_url": stream, "stream_track": "inbound_track",
        "stream_bidirectional_mode": "rtp", "stream_bidirectional_codec": "PCMU",
        "webhook_url": links.status_callback_url(phone, base_url), "webhook_url_method": "POST",
    }  # fmt: skip
    if action != MachineAction.OFF:
        # detect_beep also reports the end of the greeting (call.machine.greeting.ended).
        leave = action == MachineAction.LEAVE_MESSAGE
        body["answering_machine_detection"] = "detect_beep" if leave else "detect"
    dialled = telnyx_rest.call_dial(api_key=services.carrier_credential(phone.account), body=body)
    return str(dialled["call_control_id"]), "queued"
