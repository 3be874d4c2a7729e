"""The ``system`` tool kind: what an agent does to the phone call itself.

``end_call`` (hang up once the words being spoken have been heard), ``send_dtmf`` (keypad
tones into the call, for a menu at the other end) and ``transfer_call`` (a cold transfer
to a number or SIP URI the agent allows). Each call goes to the door's ``CallControl``
(``engine.doors.door``); a session without a call (a browser's) is never offered these
tools (``engine.session.system_tools``), and should one be called anyway it fails here.
"""

from __future__ import annotations

import json
import re

from engine.doors.door import CallControl, CallControlError
from engine.protocol import ToolStatus
from engine.tools.call import ToolRequest, ToolResult
from engine.tools.runner import ToolRunner

SYSTEM = "system"
END_CALL = "end_call"
SEND_DTMF = "send_dtmf"
TRANSFER_CALL = "transfer_call"
NAMES = (END_CALL, SEND_DTMF, TRANSFER_CALL)

DTMF_MAX = 32
DTMF_PATTERN = rf"^[0-9*#A-D]{{1,{DTMF_MAX}}}$"
# Where a call may be transferred: E.164, or a SIP URI (user@host, optional port).
_E164 = re.compile(r"^\+[1-9][0-9]{6,14}\Z")
_SIP = re.compile(r"^sips?:[A-Za-z0-9._~+\-]{1,64}@[A-Za-z0-9.\-]{1,253}(:[0-9]{1,5})?\Z")
NO_CALL = "this tool works only during a phone call"


def transfer_destination(value: object) -> bool:
    """Whether ``value`` is a number or SIP URI a call may be transferred to."""
    return isinstance(value, str) and bool(_E164.match(value) or _SIP.match(value))


def _done(**result: object) -> ToolResult:
    return ToolResult(ToolStatus.COMPLETED, result=json.dumps(result))


def _failed(error: str) -> ToolResult:
    return ToolResult(ToolStatus.FAILED, error=error)


class SystemTools(ToolRunner):
    kind = SYSTEM
    shielded = True  # a hang-up or a transfer under way is not undone by a barge-in

    def __init__(self, call: CallControl | None) -> None:
        self._call = call

    async def run(self, request: ToolRequest) -> ToolResult:
        call = self._call
        if call is None:
            return _failed(NO_CALL)
        try:
            if request.name == END_CALL:
                await call.end_call()
                return _done(ok=True, note="the call ends once your next words are heard")
            if request.name == SEND_DTMF:
                digits = str(request.arguments.get("digits", ""))
                if not re.fullmatch(DTMF_PATTERN, digits):
                    return _failed(f"digits: 1 to {DTMF_MAX} of 0-9, *, #, A-D")
                await call.send_dtmf(digits)
                return _done(sent=digits)
            if request.name == TRANSFER_CALL:
                destination = request.arguments.get("to")
                if not transfer_destination(destination):
                    return _failed("to: not a number or SIP address this agent allows")
                await call.transfer(str(destination))
                return _done(transferred=True, note="the caller is being connected; say nothing")
        except CallControlError as exc:
            return _failed(str(exc))
        return _failed(f"no system tool is called {request.name[:64]!r}")
