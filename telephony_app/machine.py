"""An answering machine picked up an outbound call: do what the agent's call settings say
(fixed on the call when it was placed). Hang up, or leave the voicemail message once the
machine's greeting is over (its beep), then hang up.

Once the call's media stream is up (its session started), the message is said by the
session itself, in the agent's voice and as the agent's words in its record
(``realtime.control.session_say``: the agent stops what it was saying), and the call ends
once the carrier echoes the mark after it (the ``end_call`` machinery). Before that (no
stream yet) the carrier speaks it (Twilio ``<Say>``, Telnyx ``speak``) in its own voice,
and the call leaves the media stream for it."""

from __future__ import annotations

import logging

from twilio.twiml.voice_response import VoiceResponse

from realtime import control
from telephony_app import calls, services, telnyx_rest, twilio_rest
from telephony_app.carrier_events import VOICEMAIL_STATE, CallEvent
from telephony_app.carrier_rest import CarrierError
from telephony_app.models import CarrierAccount, MachineAction, PhoneCall, PhoneNumber

logger = logging.getLogger(__name__)

VOICEMAIL_VOICE = {"voice": "female", "language": "en-US"}  # Telnyx speak's basic voice


def machine_event_act(*, phone: PhoneNumber, call: PhoneCall, event: CallEvent) -> str | None:
    """What was done about ``event`` ("hung-up", "voicemail", or None: nothing). Each step
    is done once per call, whatever repeats the callback (noted in ``statuses`` first)."""
    action = call.machine_action
    step = None
    if event.voicemail_spoken or (action == MachineAction.HANG_UP and event.machine):
        step = "hung-up"
    elif action == MachineAction.LEAVE_MESSAGE and event.greeting_ended:
        step = "voicemail"
    if step is None or not calls.call_step_claim(call=call, step=step):
        return None
    try:
        (_hang_up if step == "hung-up" else _leave_message)(phone, call)
    except CarrierError as error:
        logger.warning("answering machine: carrier=%s not done: %s", phone.account.carrier, error)
        return None
    logger.info("answering machine: carrier=%s %s", phone.account.carrier, step)
    return step


def _hang_up(phone: PhoneNumber, call: PhoneCall) -> None:
    credential = services.carrier_credential(phone.account)
    if phone.account.carrier == CarrierAccount.Carrier.TELNYX:
        telnyx_rest.call_command(
            api_key=credential, call_control_id=call.call_sid, command="hangup"
        )
        return
    twilio_rest.call_update(
        account_sid=phone.account.account_sid, auth_token=credential, call_sid=call.call_sid,
        form=[("Status", "completed")],
    )  # fmt: skip


def _leave_message(phone: PhoneNumber, call: PhoneCall) -> None:
    """The stream is up: the session says it, then hangs up. Else the carrier: Twilio gets
    new TwiML (the stream ends, the message is said, the call hangs up); Telnyx stops the
    stream and speaks the message, and its ``call.speak.ended`` hangs up."""
    if call.session_id and call.ended_at is None:
        control.session_say(
            session_id=call.session_id, text=call.voicemail_message, then_end_call=True
        )
        return
    credential = services.carrier_credential(phone.account)
    if phone.account.carrier == CarrierAccount.Carrier.TELNYX:
        for command, body in (
            ("streaming_stop", {}),
            ("speak", {"payload": call.voicemail_message, "client_state": VOICEMAIL_STATE,
                       **VOICEMAIL_VOICE}),
        ):  # fmt: skip
            telnyx_rest.call_command(
                api_key=credential, call_control_id=call.call_sid, command=command, body=body
            )
        return
    twiml = VoiceResponse()
    twiml.say(call.voicemail_message)
    twiml.hangup()
    twilio_rest.call_update(
        account_sid=phone.account.account_sid, auth_token=credential, call_sid=call.call_sid,
        form=[("Twiml", str(twiml))],
    )  # fmt: skip
