"""Both carriers' callbacks read into one shape: statuses in Twilio's words, Telnyx's hangup
causes mapped to them, answering-machine results, and what is not a call event at all."""

from __future__ import annotations

import pytest

from telephony_app.carrier_events import VOICEMAIL_STATE, telnyx_event, twilio_machine
from tests.telephony_app.carrier import telnyx_event as telnyx_body


@pytest.mark.parametrize(
    ("kind", "payload", "status", "answered_by"),
    [
        ("call.initiated", {}, "initiated", ""),
        ("call.answered", {}, "in-progress", ""),
        ("call.hangup", {"hangup_cause": "originator_cancel"}, "canceled", ""),
        ("call.hangup", {"hangup_cause": "something_new"}, "failed", ""),
        ("call.machine.detection.ended", {"result": "not_sure"}, "", "not_sure"),
        ("call.machine.premium.detection.ended", {"result": "fax_detected"}, "", "fax"),
        ("call.machine.premium.detection.ended", {"result": "machine"}, "", "machine"),
    ],
)
def test_telnyx_events_in_twilios_words(
    kind: str, payload: dict[str, str], status: str, answered_by: str
) -> None:
    event = telnyx_event(telnyx_body(kind, "v3:abc", **payload))
    assert event is not None and event.call_id == "v3:abc"
    assert (event.status, event.answered_by) == (status, answered_by)


def test_a_greeting_end_and_our_own_speech_are_told_apart() -> None:
    beep = telnyx_event(telnyx_body("call.machine.greeting.ended", "v3:a", result="ended"))
    assert beep is not None and beep.greeting_ended and beep.machine
    ours = telnyx_event(telnyx_body("call.speak.ended", "v3:a", client_state=VOICEMAIL_STATE))
    theirs = telnyx_event(telnyx_body("call.speak.ended", "v3:a", client_state="b3RoZXI="))
    assert ours is not None and ours.voicemail_spoken
    assert theirs is not None and not theirs.voicemail_spoken


@pytest.mark.parametrize(
    "body", [b"", b"[]", b'{"data": []}', b'{"data": {"payload": {}}}', b"\xff"]
)
def test_what_is_not_a_call_event_is_none(body: bytes) -> None:
    assert telnyx_event(body) is None
    assert telnyx_event(telnyx_body("streaming.started", "v3:a")) is None


def test_twilio_machine_results() -> None:
    end = twilio_machine({"CallSid": "CA1", "AnsweredBy": "machine_end_silence"})
    start = twilio_machine({"CallSid": "CA1", "AnsweredBy": "machine_start"})
    person = twilio_machine({"CallSid": "CA1", "AnsweredBy": "human"})
    assert end.machine and end.greeting_ended
    assert start.machine and not start.greeting_ended
    assert not person.machine and not person.greeting_ended
