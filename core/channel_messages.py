"""What processes send each other on the channel layer: one dataclass per message.

A message is its dataclass everywhere but on the layer itself: ``encode`` when it is
sent, ``decode`` when it is received (anything malformed or unknown decodes to None).
Each ``TYPE`` is also the Channels dispatch name (``tool.result`` -> ``tool_result``).
*A new message*: its dataclass here and its entry in ``_MESSAGES``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from engine.tools.call import ToolResult

EndReason = Literal["ended", "key_revoked"]


@dataclass(frozen=True)
class ToolResultDelivery:
    """A sandbox worker's result, to the session host that waits on the call."""

    TYPE: ClassVar[str] = "tool.result"
    call_id: str
    result: ToolResult

    def data(self) -> dict[str, Any]:
        return {"call_id": self.call_id, **self.result.to_wire()}

    @classmethod
    def parse(cls, data: dict[str, Any]) -> ToolResultDelivery | None:
        call_id = data.get("call_id")
        if not isinstance(call_id, str):
            return None
        return cls(call_id=call_id, result=ToolResult.from_wire(data))


@dataclass(frozen=True)
class SessionEnd:
    """To a session's group (or its key's): end it now."""

    TYPE: ClassVar[str] = "session.end"
    reason: EndReason

    def data(self) -> dict[str, Any]:
        return {"reason": self.reason}

    @classmethod
    def parse(cls, data: dict[str, Any]) -> SessionEnd:
        return cls("key_revoked" if data.get("reason") == "key_revoked" else "ended")


@dataclass(frozen=True)
class SessionSay:
    """To a session's group: say ``text`` now in the agent's voice, as the agent's words
    (``VoiceSession.speak``); ``then_end_call``: the call ends once it has been heard."""

    TYPE: ClassVar[str] = "session.say"
    text: str
    then_end_call: bool = False

    def data(self) -> dict[str, Any]:
        return {"text": self.text, "then_end_call": self.then_end_call}

    @classmethod
    def parse(cls, data: dict[str, Any]) -> SessionSay | None:
        text = data.get("text")
        if not isinstance(text, str):
            return None
        return cls(text, data.get("then_end_call") is True)


@dataclass(frozen=True)
class SessionKeyExpires:
    """To a key's sessions: the key stops working at ``at`` (epoch seconds)."""

    TYPE: ClassVar[str] = "session.key_expires"
    at: float

    def data(self) -> dict[str, Any]:
        return {"at": self.at}

    @classmethod
    def parse(cls, data: dict[str, Any]) -> SessionKeyExpires | None:
        at = data.get("at")
        if isinstance(at, bool) or not isinstance(at, int | float):
            return None
        return cls(float(at))


@dataclass(frozen=True)
class SessionHandover:
    """To a session's owner: another process resumes it; answer on ``reply_channel``."""

    TYPE: ClassVar[str] = "session.handover"
    session_id: str
    reply_channel: str

    def data(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "reply_channel": self.reply_channel}

    @classmethod
    def parse(cls, data: dict[str, Any]) -> SessionHandover | None:
        session_id, reply = data.get("session_id"), data.get("reply_channel")
        if not isinstance(reply, str):
            return None
        return cls(session_id if isinstance(session_id, str) else "", reply)


@dataclass(frozen=True)
class SessionHandoverAck:
    """The owner heard the handover request (it may take a while to finish)."""

    TYPE: ClassVar[str] = "session.handover_ack"

    def data(self) -> dict[str, Any]:
        return {}

    @classmethod
    def parse(cls, data: dict[str, Any]) -> SessionHandoverAck:
        return cls()


@dataclass(frozen=True)
class SessionHandoverDone:
    """The owner let the session go: its state is in the store."""

    TYPE: ClassVar[str] = "session.handover_done"

    def data(self) -> dict[str, Any]:
        return {}

    @classmethod
    def parse(cls, data: dict[str, Any]) -> SessionHandoverDone:
        return cls()


ChannelMessage = (
    ToolResultDelivery
    | SessionEnd
    | SessionSay
    | SessionKeyExpires
    | SessionHandover
    | SessionHandoverAck
    | SessionHandoverDone
)

_MESSAGES: dict[str, type[ChannelMessage]] = {
    message.TYPE: message
    for message in (
        ToolResultDelivery,
        SessionEnd,
        SessionSay,
        SessionKeyExpires,
        SessionHandover,
        SessionHandoverAck,
        SessionHandoverDone,
    )
}


def encode(message: ChannelMessage) -> dict[str, Any]:
    return {"type": message.TYPE, **message.data()}


def decode(raw: dict[str, Any]) -> ChannelMessage | None:
    kind = _MESSAGES.get(str(raw.get("type")))
    return kind.parse(raw) if kind is not None else None
