"""The carriers' voice webhooks: thin; the signature decides, ``calls`` answers.

Every refusal is the same bare 403, whether the number is unknown, belongs to another
account or the signature is wrong: a caller of this URL learns nothing."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core import rates
from telephony_app import calls, carrier_events, links, machine, selectors, services, signatures
from telephony_app.models import CarrierAccount, PhoneNumber

logger = logging.getLogger(__name__)

Carrier = CarrierAccount.Carrier
EventReader = Callable[[Mapping[str, str]], "carrier_events.CallEvent"]


def _refused(why: str, carrier: str) -> HttpResponse:
    logger.warning("phone webhook refused: carrier=%s why=%s", carrier, why)
    return HttpResponse(status=403)


def _params(request: HttpRequest) -> dict[str, str]:
    """TeXML and TwiML webhooks post a form; Telnyx may post JSON of the same names."""
    if request.content_type == "application/json":
        try:
            body = json.loads(request.body)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            return {}
        return {k: str(v) for k, v in body.items()} if isinstance(body, dict) else {}
    return {key: request.POST.get(key, "") for key in request.POST}


def _signed(phone: PhoneNumber, request: HttpRequest, params: dict[str, str]) -> bool:
    account = phone.account
    if account.carrier == Carrier.TWILIO:
        return (
            signatures.twilio_valid(
                auth_token=services.carrier_credential(account),
                url=links.platform_base(request) + request.get_full_path(),
                params=params,
                signature=request.headers.get("X-Twilio-Signature", ""),
            )
            and params.get("AccountSid") == account.account_sid
        )
    return signatures.telnyx_valid(
        public_key=account.public_key,
        body=request.body,
        signature=request.headers.get("Telnyx-Signature-Ed25519", ""),
        timestamp=request.headers.get("Telnyx-Timestamp", ""),
    )


@csrf_exempt
@require_POST
def voice(request: HttpRequest, carrier: str, uid: str) -> HttpResponse:
    phone = selectors.phone_number_by_uid(carrier=carrier, uid=uid)
    if phone is None:
        return _refused("unknown number", carrier)
    params = _params(request)
    if not _signed(phone, request, params) or not _for_this_number(phone, params):
        return _refused("bad signature", carrier)
    if rates.hit_sync(calls.inbound_rate(), phone.uid) is not None:
        logger.warning("phone call turned away: carrier=%s why=inbound rate", carrier)
        return _markup(calls.busy_markup())
    try:
        markup = calls.inbound_call_answer(
            phone=phone,
            call_sid=params.get("CallSid", ""),
            caller=params.get("From", ""),
            called=params.get("To", ""),
            stream_url=links.stream_url(carrier, links.platform_base(request)),
        )
    except calls.CallRefused as refused:
        return _refused(str(refused), carrier)
    return _markup(markup)


def _markup(markup: str) -> HttpResponse:
    response = HttpResponse(markup, content_type="text/xml")
    response["Cache-Control"] = "no-store"
    return response


def _for_this_number(phone: PhoneNumber, params: dict[str, str]) -> bool:
    """Telnyx signs the body, not the URL: a body signed for one number must not start a
    call on another number registered with the same key. (Twilio signs the URL.)"""
    if phone.account.carrier == Carrier.TWILIO:
        return True
    return params.get("To", "") == phone.number


def _call_event(phone: PhoneNumber, request: HttpRequest, read: EventReader) -> HttpResponse:
    """A signed event about a call placed from ``phone``: recorded on the call, then acted
    on if an answering machine is involved. 204, or 404 for a call we did not place."""
    params = _params(request)
    if not _signed(phone, request, params):
        return _refused("bad signature", phone.account.carrier)
    if phone.account.carrier == Carrier.TELNYX:
        event = carrier_events.telnyx_event(request.body)
    else:
        event = read(params)
    if event is None:
        return HttpResponse(status=204)  # an event we do not read (streaming.started…)
    call = calls.call_status_record(phone=phone, event=event)
    if call is None:
        return HttpResponse(status=404)
    machine.machine_event_act(phone=phone, call=call, event=event)
    return HttpResponse(status=204)


@csrf_exempt
@require_POST
def status(request: HttpRequest, carrier: str, uid: str) -> HttpResponse:
    """The carrier's status callbacks of a call placed from this number (Telnyx: every
    Call Control event of it): signed like the voice webhook, kept in ``statuses``."""
    phone = selectors.phone_number_by_uid(carrier=carrier, uid=uid)
    if phone is None:
        return _refused("unknown number", carrier)
    return _call_event(phone, request, carrier_events.twilio_status)


@csrf_exempt
@require_POST
def machine_detected(request: HttpRequest, carrier: str, uid: str) -> HttpResponse:
    """Twilio's asynchronous answering-machine detection (``AnsweredBy``)."""
    phone = selectors.phone_number_by_uid(carrier=carrier, uid=uid)
    if phone is None or carrier != Carrier.TWILIO:
        return _refused("unknown number", carrier)
    return _call_event(phone, request, carrier_events.twilio_machine)
