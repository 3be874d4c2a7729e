"""A live call's controls at its carrier: the cold transfer of ``transfer_call``, and the
hang-up a Telnyx call needs when the agent ends it (``call_hang_up``).

Twilio: the live call is updated, through its Calls API, with TwiML (made with the
``twilio`` SDK) that dials the destination (``<Dial>`` a number, or ``<Dial><Sip>`` a SIP
URI). Telnyx: its Call Control ``transfer`` command. Both go through the platform's one
carrier request helper (``carrier_rest``), so through the egress guard like every URL the
platform dials. Either way the carrier then ends our media stream (``stop``), which ends
the session. A refusal is a ``CallControlError`` in fixed words: what the carrier said may
quote numbers, and it goes to the LLM.
"""

from __future__ import annotations

import logging

from twilio.twiml.voice_response import Dial, VoiceResponse

from engine.doors.door import CallControlError
from telephony_app import telnyx_rest, twilio_rest
from telephony_app.carrier_rest import CarrierError
from telephony_app.models import CarrierAccount, PhoneCall
from telephony_app.services import carrier_credential

logger = logging.getLogger(__name__)

REFUSED = "the phone company refused the transfer; tell the caller it did not work"


def _twiml(destination: str) -> str:
    response = VoiceResponse()
    if destination.startswith(("sip:", "sips:")):
        dial = Dial()
        dial.sip(destination)
        response.append(dial)
    else:
        response.dial(destination)
    return str(response)


def call_transfer(*, call: PhoneCall, destination: str) -> None:
    """Hand ``call`` to ``destination`` at its carrier (run in a thread: blocking HTTP)."""
    if call.number is None:  # the number was deleted during the call
        raise CallControlError(REFUSED)
    account = call.number.account
    try:
        if account.carrier == CarrierAccount.Carrier.TWILIO:
            twilio_rest.call_update(
                account_sid=account.account_sid, auth_token=carrier_credential(account),
                call_sid=call.call_sid, form=[("Twiml", _twiml(destination))],
            )  # fmt: skip
        else:
            telnyx_rest.call_command(
                api_key=carrier_credential(account), call_control_id=call.call_sid,
                command="transfer", body={"to": destination},
            )  # fmt: skip
    except CarrierError:
        raise CallControlError(REFUSED) from None
    logger.info("phone call transferred: workspace=%s carrier=%s", call.workspace_id, call.carrier)


def call_hang_up(*, call: PhoneCall) -> None:
    """End ``call`` at its carrier when the agent ends it. A Telnyx call placed through Call
    Control stays up when its media stream closes, so it gets the ``hangup`` command; a
    Twilio call (and a TeXML one) ends with its ``<Connect><Stream>``: nothing to send.
    Run in a thread (blocking HTTP); a refusal is a ``CallControlError``."""
    if call.number is None or call.number.account.carrier != CarrierAccount.Carrier.TELNYX:
        return
    try:
        telnyx_rest.call_command(
            api_key=carrier_credential(call.number.account), call_control_id=call.call_sid,
            command="hangup", body={},
        )  # fmt: skip
    except CarrierError:
        raise CallControlError("the phone company did not take the hang-up") from None
