"""What a carrier's status callbacks say about a call, in one shape for both carriers.

Twilio posts a form per status (and its asynchronous answering-machine detection posts
``AnsweredBy`` to a URL of its own); Telnyx posts one signed JSON event per thing that
happened (``call.answered``, ``call.hangup`` with its cause, ``call.machine.*``…). Statuses
are kept in Twilio's words, so a call's history reads the same whichever carrier."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

VOICEMAIL_STATE = base64.b64encode(b"voicemail").decode()  # Telnyx's client_state

# Telnyx's hangup causes, as Twilio's final statuses.
TELNYX_HANGUP = {
    "normal_clearing": "completed", "time_limit": "completed", "user_busy": "busy",
    "timeout": "no-answer", "no_answer": "no-answer", "originator_cancel": "canceled",
    "call_rejected": "failed", "not_found": "failed", "unallocated_number": "failed",
}  # fmt: skip
TELNYX_STATUS = {"call.initiated": "initiated", "call.answered": "in-progress"}
TELNYX_GREETING_ENDED = ("call.machine.greeting.ended", "call.machine.premium.greeting.ended")
TELNYX_DETECTED = ("call.machine.detection.ended", "call.machine.premium.detection.ended")


@dataclass(frozen=True)
class CallEvent:
    call_id: str
    status: str = ""  # initiated, ringing, in-progress, completed, busy, no-answer, failed…
    duration_s: str = ""
    answered_by: str = ""  # the carrier's words: human, machine, machine_end_beep…
    greeting_ended: bool = False  # a machine's greeting is over: a message lands on the tape
    voicemail_spoken: bool = False  # the message we asked the carrier to speak was spoken

    @property
    def machine(self) -> bool:
        return self.answered_by.startswith("machine") or self.answered_by == "fax"


def twilio_status(params: Mapping[str, str]) -> CallEvent:
    return CallEvent(
        call_id=params.get("CallSid", "")[:128],
        status=params.get("CallStatus", "")[:20],
        duration_s=params.get("CallDuration", ""),
    )


def twilio_machine(params: Mapping[str, str]) -> CallEvent:
    """Asynchronous AMD: ``machine_end_*`` once the greeting ended (DetectMessageEnd)."""
    answered_by = params.get("AnsweredBy", "")[:24]
    return CallEvent(
        call_id=params.get("CallSid", "")[:128],
        answered_by=answered_by,
        greeting_ended=answered_by.startswith("machine_end") or answered_by == "fax",
    )


def telnyx_event(body: bytes) -> CallEvent | None:
    """None: not a call event we read (streaming.started and the like)."""
    try:
        data = json.loads(body).get("data") or {}
        kind, payload = str(data.get("event_type", "")), data.get("payload") or {}
        call_id = str(payload.get("call_control_id", ""))[:128]
    except (ValueError, AttributeError, RecursionError):
        return None
    if not call_id or not isinstance(payload, dict):
        return None
    return _telnyx(kind, payload, call_id)


def _telnyx(kind: str, payload: dict[str, Any], call_id: str) -> CallEvent | None:
    result = str(payload.get("result", ""))[:24]
    if kind in TELNYX_STATUS:
        return CallEvent(call_id=call_id, status=TELNYX_STATUS[kind])
    if kind == "call.hangup":
        cause = str(payload.get("hangup_cause", ""))
        return CallEvent(call_id=call_id, status=TELNYX_HANGUP.get(cause, "failed"))
    if kind in TELNYX_DETECTED:  # human, machine, not_sure (premium: human_residence, fax…)
        detected = next((word for word in ("machine", "fax") if word in result), result)
        return CallEvent(call_id=call_id, answered_by=detected)
    if kind in TELNYX_GREETING_ENDED:
        return CallEvent(call_id=call_id, answered_by="machine", greeting_ended=True)
    if kind == "call.speak.ended":
        spoken = payload.get("client_state") == VOICEMAIL_STATE
        return CallEvent(call_id=call_id, voicemail_spoken=spoken)
    return None
