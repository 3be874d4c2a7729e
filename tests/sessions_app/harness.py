"""A VoiceSession wired to the scripted fakes, with everything it sends collected in order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from engine import protocol
from engine.session import SessionConfig, TurnMetrics, VoiceSession
from tests.engine.providers.fake import (
    FakeLLM,
    FakeSTT,
    FakeToolRunner,
    FakeTTS,
    silence_pcm,
    tone_pcm,
)


class Harness:
    """A session wired to fakes, with everything it sends collected in order."""

    def __init__(
        self,
        *,
        llm: FakeLLM | None = None,
        stt: FakeSTT | None = None,
        tts: FakeTTS | None = None,
        runner: FakeToolRunner | None = None,
        emit_delay: float = 0.0,
        first_seq: int = 0,
        **config: Any,
    ) -> None:
        self.emit_delay = emit_delay
        self.llm = llm or FakeLLM()
        self.stt = stt or FakeSTT()
        self.tts = tts or FakeTTS()
        self.runner = runner or FakeToolRunner()
        self.events: list[dict[str, Any]] = []
        self.timeline: list[str] = []  # event types and "audio", in send order
        self.audio: list[bytes] = []
        self.metrics: list[TurnMetrics] = []
        self.provider_errors: list[tuple[str, str]] = []  # (code, detail) for the record
        config = {"mode": "text", **config}
        self.session = VoiceSession(
            config=SessionConfig(
                session_id="s1", resume_token="r1", workspace_id=7, llm_name="fake", **config
            ),
            llm=self.llm,
            tool_runner=self.runner,
            emit=self._emit,
            send_audio=self._send_audio,
            stt=self.stt,
            tts=self.tts,
            on_turn_metrics=self.metrics.append,
            on_provider_error=lambda code, detail: self.provider_errors.append((code, detail)),
            first_seq=first_seq,
        )

    async def _emit(self, stamped: protocol.Stamped) -> None:
        if self.emit_delay:
            await asyncio.sleep(self.emit_delay)
        event = stamped.to_wire()  # what a client would read
        self.events.append(event)
        if event["type"] != "metrics":  # checked by the metrics tests on their own
            self.timeline.append(event["type"])

    async def _send_audio(self, chunk: bytes) -> None:
        self.audio.append(chunk)
        self.timeline.append("audio")

    @property
    def types(self) -> list[str]:
        return [event["type"] for event in self.events if event["type"] != "metrics"]

    def of_type(self, event_type: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["type"] == event_type]

    async def wait_for(self, event_type: str, count: int = 1, within: float = 3.0) -> None:
        await until(lambda: len(self.of_type(event_type)) >= count, within)

    async def say(self, text: str) -> None:
        await self.session.handle(protocol.TextMessage(text=text))

    async def speak(self, speech_ms: int = 200, silence_ms: int = 200) -> None:
        """Push 20 ms frames of tone, then of silence, as a microphone would."""
        for _ in range(speech_ms // 20):
            await self.session.push_audio(tone_pcm(20))
        for _ in range(silence_ms // 20):
            await self.session.push_audio(silence_pcm(20))


async def until(condition: Callable[[], bool], within: float = 3.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.002)


async def started(make: Callable[..., Harness], **kwargs: Any) -> Harness:
    harness = make(**kwargs)
    await harness.session.start()
    return harness
