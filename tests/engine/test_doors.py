"""The transport seam carries a door that is not the browser's: a skeleton phone door
(8 kHz μ-law both ways, no resume, a call with its controls) driven through a whole turn
with the scripted providers and no Django: the caller's μ-law speech reaches the
recogniser as 16 kHz PCM, the reply comes back as μ-law at 8 kHz (as long as it was
spoken, and audible), the typed events reach the door, and the agent's ``end_call``
reaches the door's call controls through the ``system`` tool kind. Also: the audio
conversions on their own, and which tools a phone session offers."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any

import pytest

from engine import protocol
from engine.doors.audio import (
    SESSION_INPUT,
    AudioConverter,
    AudioEncoding,
    AudioFormat,
    pcm_to_ulaw,
    ulaw_to_pcm,
)
from engine.doors.door import CallControlError, Door, DoorAudio, DoorHost
from engine.session import SessionConfig, VoiceSession
from engine.session.config import ToolDefinition
from engine.session.system_tools import phone_tools
from engine.tools import system
from engine.tools.call import ToolRequest
from tests.engine.providers.fake import (
    FakeLLM,
    FakeSTT,
    FakeToolRunner,
    FakeTTS,
    rms,
    tone_pcm,
    tool_call,
)

PHONE_LINE = AudioFormat(AudioEncoding.MULAW, 8_000)
FRAME = 160  # 20 ms of μ-law at 8 kHz


class SkeletonPhoneDoor(Door):
    """What a carrier's door does, without a carrier: μ-law 8 kHz, events kept as typed."""

    name = "skeleton-phone"
    audio_in = PHONE_LINE
    resumable = False

    def __init__(self) -> None:
        self.events: list[protocol.Stamped] = []
        self.audio = bytearray()  # μ-law the caller heard
        self.closed_with: tuple[int, str] | None = None
        self.controls: list[tuple[str, str]] = []
        self.heard: float | None = None  # what its peer played of the reply, if it says

    def played_ms(self) -> float | None:
        return self.heard

    def audio_out(self, session_rate: int) -> AudioFormat:
        return PHONE_LINE

    @property
    def call(self) -> SkeletonPhoneDoor:
        return self

    async def send_event(self, event: protocol.Stamped) -> None:
        self.events.append(event)

    async def send_audio(self, audio: bytes) -> None:
        self.audio += audio

    async def close(self, code: int, reason: str) -> None:
        self.closed_with = (code, reason)

    async def end_call(self) -> None:
        self.controls.append(("end_call", f"after {len(self.of(protocol.TtsDoneEvent))} replies"))

    async def send_dtmf(self, digits: str) -> None:
        self.controls.append(("send_dtmf", digits))

    async def transfer(self, destination: str) -> None:
        if destination.startswith("sip:"):
            raise CallControlError("the phone company refused the transfer")
        self.controls.append(("transfer", destination))

    def of(self, kind: type[protocol.ServerEvent]) -> list[Any]:
        return [stamped.event for stamped in self.events if isinstance(stamped.event, kind)]


class SkeletonHost(DoorHost):
    """The engine side of the seam in a few lines (the realtime app's ``Connection`` adds
    keys, limits, records and resume): one session, its audio through ``DoorAudio``."""

    def __init__(self, door: Door, *, llm: FakeLLM, tools: list[ToolDefinition]) -> None:
        self.door, self.audio_bridge = door, DoorAudio(door)
        self.stt = FakeSTT(texts=["where is my order"], silence_ms=300)
        self.session = VoiceSession(
            config=SessionConfig(
                session_id="s1", resume_token="r1", workspace_id=1, llm_name="fake",
                mode="voice", tts_sample_rate=24_000,
                tools=phone_tools(tools) if door.call is not None else tools,
            ),
            llm=llm, tool_runner=FakeToolRunner(), stt=self.stt, tts=FakeTTS(),
            emit=door.send_event, send_audio=self._say, call=door.call,
            played_ms=door.played_ms,
        )  # fmt: skip

    async def _say(self, pcm: bytes) -> None:
        await self.audio_bridge.say(pcm, session_rate=self.session.config.tts_sample_rate)

    async def open(
        self, *, credentials: Mapping[str, str], origin: str | None, address: str
    ) -> None:
        await self.session.start()

    async def audio(self, chunk: bytes) -> None:
        pcm = self.audio_bridge.heard(chunk)
        if pcm:
            await self.session.push_audio(pcm)

    async def control(self, message: protocol.ClientMessage) -> None:
        await self.session.handle(message)

    async def closed(self, code: int | None) -> None:
        await self.session.close()


async def _until(condition: Any, within: float = 5.0) -> None:
    for _ in range(int(within / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not within time")


async def _speak(host: SkeletonHost, ms: int) -> None:
    """The caller's words as a phone line carries them: a tone, 20 ms μ-law frames."""
    spoken = pcm_to_ulaw(tone_pcm(ms, sample_rate=8_000, amplitude=8000))
    for start in range(0, len(spoken), FRAME):
        await host.audio(spoken[start : start + FRAME])
    for _ in range(40):  # 800 ms of the line's silence ends the utterance
        await host.audio(b"\xff" * FRAME)


async def test_a_whole_turn_through_a_mulaw_door() -> None:
    door = SkeletonPhoneDoor()
    llm = FakeLLM(
        script=[
            ["Your order ships tomorrow."],
            [tool_call("end_call")],
            ["Goodbye!"],
        ]
    )
    enabled = ToolDefinition(name="end_call", client=True)  # how an agent enables it
    host = SkeletonHost(door, llm=llm, tools=[enabled])
    await host.open(credentials={}, origin=None, address="")
    await _speak(host, 600)
    await _until(lambda: door.of(protocol.TtsDoneEvent))
    # The recogniser heard 16 kHz PCM: two bytes a sample, twice the line's samples.
    stream = host.stt.streams[0]
    assert stream.sample_rate == SESSION_INPUT.rate
    assert stream.received_bytes == pytest.approx((600 + 800) * 32, rel=0.05)
    (turn,) = door.of(protocol.TurnEvent)
    assert turn.text == "where is my order"
    assert door.of(protocol.ChatEvent)[0].text == "Your order ships tomorrow."
    # The reply came back as μ-law at 8 kHz: one byte a sample, as long as it was spoken
    # (FakeTTS: 10 ms a character), and audible.
    reply_ms = len("Your order ships tomorrow.") * 10
    assert len(door.audio) == pytest.approx(reply_ms * 8, rel=0.1)
    assert rms(ulaw_to_pcm(bytes(door.audio))) > 500
    assert [event.seq for event in door.events] == sorted(event.seq for event in door.events)

    await _speak(host, 400)  # "bye": the agent hangs up through the system tool kind
    await _until(lambda: len(door.of(protocol.ChatEvent)) == 2)
    assert door.controls == [("end_call", "after 1 replies")]
    statuses = [(e.name, e.status) for e in door.of(protocol.ToolStatusEvent)]
    assert statuses == [("end_call", "started"), ("end_call", "completed")]
    assert not door.of(protocol.ToolCallEvent)  # a system tool is not the page's
    assert door.of(protocol.ChatEvent)[1].text == "Goodbye!"
    await host.closed(1000)


def test_audio_converts_between_the_line_and_the_session() -> None:
    tone = tone_pcm(1000, sample_rate=8_000, amplitude=8000)
    up = AudioConverter(PHONE_LINE, SESSION_INPUT)
    heard = b"".join(up(pcm_to_ulaw(tone[i : i + 320])) for i in range(0, len(tone), 320))
    # 1 s of 16 kHz PCM16, less what the resampler's filter still holds (under 100 ms)
    assert 32_000 - 3_200 < len(heard) <= 32_000
    assert rms(heard[3_200:]) == pytest.approx(8000 / math.sqrt(2), rel=0.05)
    same = AudioConverter(SESSION_INPUT, SESSION_INPUT)
    assert same.passthrough and same(b"\x01\x02") == b"\x01\x02"


def test_a_phone_session_offers_the_system_tools_the_agent_declared() -> None:
    declared = [
        ToolDefinition(name="end_call", client=True),
        ToolDefinition(name="send_dtmf", client=True, description="Press 1 for sales"),
        ToolDefinition(
            name="transfer_call",
            client=True,
            parameters={
                "type": "object",
                "properties": {"to": {"type": "string", "enum": ["+14155550199", "tel:x"]}},
            },
        ),
        ToolDefinition(name="open_file", client=True),
        ToolDefinition(name="track_order", handler="() => 1"),
    ]
    offered = {tool.name: tool for tool in phone_tools(declared)}
    assert {name: tool.kind for name, tool in offered.items()} == {
        "end_call": "system", "send_dtmf": "system", "transfer_call": "system",
        "open_file": "browser", "track_order": "sandbox",
    }  # fmt: skip
    assert offered["send_dtmf"].description == "Press 1 for sales"
    # Only the destinations the agent allows, valid ones only, as the LLM's only choice.
    assert offered["transfer_call"].parameters["properties"]["to"]["enum"] == ["+14155550199"]
    no_destination = [ToolDefinition(name="transfer_call", client=True)]
    assert phone_tools(no_destination) == []


async def test_system_tools_check_their_arguments_and_need_a_call() -> None:
    door = SkeletonPhoneDoor()
    runner = system.SystemTools(door)

    def request(name: str, **arguments: Any) -> ToolRequest:
        return ToolRequest(call_id="c", workspace_id=1, name=name, arguments=arguments,
                           timeout_s=5, kind="system")  # fmt: skip

    assert (await runner.run(request("send_dtmf", digits="12#"))).status == "completed"
    assert (await runner.run(request("send_dtmf", digits="9; rm"))).status == "failed"
    assert (await runner.run(request("transfer_call", to="+14155550199"))).status == "completed"
    refused = await runner.run(request("transfer_call", to="sip:desk@example.com"))
    assert refused.status == "failed" and refused.error is not None and "refused" in refused.error
    assert (await runner.run(request("transfer_call", to="0900 CALL ME"))).status == "failed"
    assert door.controls == [("send_dtmf", "12#"), ("transfer", "+14155550199")]
    browserless = await system.SystemTools(None).run(request("end_call"))
    assert browserless.status == "failed" and browserless.error == system.NO_CALL


REPLY = "Your order ships tomorrow morning. It comes by post. Anything else today?"


@pytest.mark.parametrize(
    ("heard_ms", "kept"),
    [
        # The carrier echoed the reply's last mark, though by the session's clock (the reply
        # was all sent a moment ago) only its first sentence has started: all of it stays.
        (len(REPLY) * 10.0, REPLY),
        # No mark came back yet: the caller heard nothing of it (the clock says otherwise).
        (0.0, "[interrupted]"),
    ],
)
async def test_the_doors_account_of_what_was_played_outranks_the_clock(
    heard_ms: float, kept: str
) -> None:
    door = SkeletonPhoneDoor()
    host = SkeletonHost(door, llm=FakeLLM(script=[[REPLY], ["Sure."]]), tools=[])
    await host.open(credentials={}, origin=None, address="")
    await _speak(host, 600)
    await _until(lambda: door.of(protocol.TtsDoneEvent))
    door.heard = heard_ms
    await _speak(host, 400)  # the caller talks over it
    await _until(lambda: len(door.of(protocol.ChatEvent)) == 2)
    assert door.of(protocol.CancelledEvent)[0].reason == "barge_in"
    assert {"role": "assistant", "content": kept} in host.session.history
    await host.closed(1000)


async def test_speak_says_a_fixed_text_as_the_agents_then_ends_the_call() -> None:
    """``speak``: the text is said in the agent's voice and is the agent's in history and
    in a ``chat`` event, the LLM is not asked, what the agent was saying stops, and the
    call's ``end_call`` comes once the text's audio is all sent (before its ``tts_done``,
    so the door's last mark follows it)."""
    door = SkeletonPhoneDoor()
    llm = FakeLLM(script=[["A long answer that the machine does not need to hear at all."]])
    host = SkeletonHost(door, llm=llm, tools=[])
    await host.open(credentials={}, origin=None, address="")
    await _speak(host, 600)
    await _until(lambda: door.audio)
    message = "Hi, this is Acme. Please call us back."
    heard_before, replies = len(door.audio), len(door.of(protocol.TtsDoneEvent))
    await host.session.speak(message, then_end_call=True)
    await _until(lambda: len(door.of(protocol.TtsDoneEvent)) > replies)
    assert door.controls == [("end_call", f"after {replies} replies")]
    assert door.of(protocol.ChatEvent)[-1].text == message
    assert len(llm.requests) == 1  # the message is no turn of the LLM's
    assert host.session.history[-1] == {"role": "assistant", "content": message}
    said_ms = (len(door.audio) - heard_before) / 8
    assert said_ms >= len(message) * 10 * 0.9
    await host.closed(1000)
