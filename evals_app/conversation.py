"""A conversation with an agent on the engine's own session, off any socket: what tests
and simulations drive. Typed turns go in as a page's ``text`` messages; spoken turns
(``say_aloud``) as a microphone's audio, through the session's own speech-in path (the
recogniser a browser's audio goes to), and what it heard is kept. No tool runs, of any
kind (sandbox, browser, MCP, knowledge, system): every call answers with the result the
test gives it (``{"ok": true}`` by default) and nothing is dialled; every call is
recorded with its arguments."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any

from engine import protocol
from engine.protocol import ErrorCode, ToolStatus
from engine.providers.base import STT, TTS
from engine.session import VoiceSession
from engine.session.config import SettledToolCall
from engine.session.usage import usage_from_wire
from engine.tools.call import ToolRequest, ToolResult
from engine.tools.runner import SANDBOX, ToolRunner
from evals_app import speech
from realtime.session_setup import SessionPlan

DEFAULT_TOOL_RESULT: dict[str, Any] = {"ok": True}
NOT_HEARD = "not_heard"  # a spoken turn the recogniser made no words of
TOO_LONG = "too_long"  # a spoken turn longer than AGENT_TEST_SPOKEN_MAX_S
TIMEOUT = "timeout"
FRAME_BYTES = 640  # 20 ms at 16 kHz: what a browser's microphone sends at a time
LEAD_SILENCE_MS = 300
# Past the recogniser's longest wait for the end of a turn (``incomplete_silence_ms``).
TRAIL_SILENCE_MS = 1500
# Warnings: the turn goes on (a TTS failure still shows the reply's text).
_NOT_FATAL = {ErrorCode.VOICE_UNAVAILABLE.value, ErrorCode.TTS_FAILED.value}


@dataclass(frozen=True)
class ToolUse:
    name: str
    arguments: Any


@dataclass
class Reply:
    """What the agent did with one user turn."""

    text: str = ""
    tools: list[ToolUse] = field(default_factory=list)
    error: str = ""  # the session's error code (or ours: NOT_HEARD, TOO_LONG, timeout)
    heard: str | None = None  # a spoken turn: what the recogniser made of it
    audio_ms: int = 0  # a speaking agent: how long its reply's audio is


class MockedTools(ToolRunner):
    """Answers every tool with the given results instead of running it."""

    def __init__(self, results: dict[str, Any]) -> None:
        self.results = results

    async def run(self, request: ToolRequest) -> ToolResult:
        result = self.results.get(request.name, DEFAULT_TOOL_RESULT)
        return ToolResult(status=ToolStatus.COMPLETED, result=json.dumps(result))


class Conversation:
    """One session; ``say`` is a typed user turn and its reply, ``say_aloud`` a spoken one.

    Given ``stt`` the session is in voice mode and hears spoken turns; given ``tts`` too it
    speaks its replies (a voice simulation), and the user hears each to its end before
    answering: the session's clock moves past the reply's playback rather than waiting
    for it in real time, so no answer reads as the user talking over the agent."""

    def __init__(
        self,
        plan: SessionPlan,
        *,
        tool_results: dict[str, Any],
        turn_timeout_s: float,
        stt: STT | None = None,
        tts: TTS | None = None,
    ) -> None:
        self.tool_results = tool_results
        self.turn_timeout_s = turn_timeout_s
        self.greeting = ""
        self.usage: dict[str, int] = {}
        self._events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._tools: list[ToolUse] = []
        self._skipped_s = 0.0  # how far the session's clock ran ahead (replies listened to)
        self._played_until = 0.0  # when the user will have heard the agent's audio so far
        self._audio_bytes = 0  # the agent's audio in this turn
        config = plan.config
        config.mode = "voice" if stt is not None else "text"
        config.audio_ready = True  # the user hears from the start
        config.voice = None  # the offline voice's own, whatever the agent's provider names
        # Every tool goes to the one mocked runner, whatever its kind.
        config.tools = [dataclasses.replace(tool, kind=SANDBOX) for tool in config.tools]
        self.session = VoiceSession(
            config=config,
            llm=plan.llm,
            tool_runner=MockedTools(tool_results),
            emit=self._emit,
            send_audio=self._audio,
            stt=stt,
            tts=tts,
            clock=self._clock,
            on_tool_settled=self._settled,
            scrub=plan.scrubber,
        )

    def _clock(self) -> float:
        return time.monotonic() + self._skipped_s

    async def _emit(self, stamped: protocol.Stamped) -> None:
        event = stamped.to_wire()  # as a page reads it: what a test's expectations name
        if event.get("type") == "metrics":  # what each turn consumed, for usage and quotas
            self._count(usage_from_wire(event.get("usage") or {}))
        elif event.get("type") == "greeting":
            self.greeting = str(event.get("text", ""))
        await self._events.put(event)

    def _count(self, usage: dict[str, int]) -> None:
        for name, value in usage.items():
            self.usage[name] = self.usage.get(name, 0) + value

    async def _audio(self, chunk: bytes) -> None:
        """The agent's speech, heard as a page plays it (in the order it comes)."""
        self._audio_bytes += len(chunk)
        seconds = len(chunk) / (2 * self.session.config.tts_sample_rate)
        self._played_until = max(self._played_until, self._clock()) + seconds

    def _settled(self, call: SettledToolCall) -> None:
        self._tools.append(ToolUse(name=call.name, arguments=call.arguments))

    async def start(self) -> None:
        await self.session.start()
        if self.greeting and self.session.speaks:  # heard to its end before the first turn
            async with asyncio.timeout(self.turn_timeout_s):
                while (await self._events.get()).get("type") != "tts_done":
                    pass

    async def say(self, text: str) -> Reply:
        self._begin()
        await self.session.handle(protocol.TextMessage(text=text))
        return await self._reply(Reply())

    async def say_aloud(self, text: str) -> Reply:
        """``text`` spoken by the offline voice, sent as a microphone sends it: 20 ms
        frames, between silences, to the session's recogniser."""
        self._begin()
        try:
            pcm = await speech.spoken(text)
        except speech.TooLong:
            return Reply(error=TOO_LONG, heard="")
        self._count({"tts_characters": len(text)})  # the user's voice is synthesized too
        if not pcm:  # nothing to say ("…", symbols): no words to wait the turn's timeout for
            return Reply(error=NOT_HEARD, heard="")
        audio = _silence(LEAD_SILENCE_MS) + pcm + _silence(TRAIL_SILENCE_MS)
        for start in range(0, len(audio), FRAME_BYTES):
            await self.session.push_audio(audio[start : start + FRAME_BYTES])
        return await self._reply(Reply(heard=""))

    def _begin(self) -> None:
        self._tools, self._audio_bytes = [], 0
        self._skipped_s += max(0.0, self._played_until - self._clock())

    async def _reply(self, reply: Reply) -> Reply:
        try:
            async with asyncio.timeout(self.turn_timeout_s):
                await self._read(reply)
        except TimeoutError:
            reply.error = NOT_HEARD if reply.heard == "" else TIMEOUT
        reply.tools = list(self._tools)
        reply.audio_ms = self._audio_bytes * 1000 // (2 * self.session.config.tts_sample_rate)
        return reply

    async def _read(self, reply: Reply) -> None:
        """The turn's events up to its reply (and, when the agent speaks, its audio's end)."""
        while True:
            event = await self._events.get()
            kind = event.get("type")
            if kind == "turn" and reply.heard is not None:  # the recogniser ended the turn
                reply.heard = " ".join(filter(None, (reply.heard, str(event.get("text", "")))))
            elif kind == "chat":
                reply.text = str(event.get("text", ""))
                if not self.session.speaks:
                    return
            elif kind == "tts_done" and reply.text:
                return
            elif kind == "error" and event.get("code") not in _NOT_FATAL:
                reply.error = str(event.get("code", "error"))
                return

    async def close(self) -> None:
        await self.session.close()
        self._count(self.session.take_usage())  # audio heard after the last turn's figures


def _silence(ms: int) -> bytes:
    return bytes(protocol.CLIENT_SAMPLE_RATE * 2 * ms // 1000)
