"""Scripted, deterministic providers for tests, benchmarks and the offline browser demo.

They speak the same interfaces as the real adapters (``base.py``) and record what they
were asked, so tests assert on behaviour instead of mocking calls.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import itertools
import json
import math
import time
import warnings
from array import array
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.protocol import ErrorCode, ToolStatus
from engine.providers import languages, registry
from engine.providers.base import (
    LLM,
    STT,
    TTS,
    Capabilities,
    FinalTranscript,
    LLMDone,
    LLMEvent,
    PartialTranscript,
    ProviderError,
    SpeechStarted,
    STTEvent,
    STTStream,
    TextDelta,
    ToolCall,
    ToolCallsRequested,
    ToolSpec,
)
from engine.providers.spec import ProviderSpec
from engine.tools.call import ToolRequest, ToolResult
from engine.tools.runner import ToolRunner

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop  # in C; audioop-lts on Python 3.13+ (see engine/doors/audio.py)

# ---------------------------------------------------------------- audio helpers


def tone_pcm(
    ms: float, *, sample_rate: int = 16_000, amplitude: int = 8000, hz: int = 440
) -> bytes:
    """A sine tone as PCM16 little-endian mono (loud enough to count as speech)."""
    size = 2 * int(sample_rate * ms / 1000)
    second = _tone_second(sample_rate, amplitude, hz)
    return (second * (size // len(second) + 1))[:size]


@functools.lru_cache(maxsize=8)
def _tone_second(sample_rate: int, amplitude: int, hz: int) -> bytes:
    # Whole seconds hold whole cycles of an integer frequency, so they tile seamlessly.
    step = 2 * math.pi * hz / sample_rate
    return _little_endian(
        array("h", (int(amplitude * math.sin(step * i)) for i in range(sample_rate)))
    )


def silence_pcm(ms: float, *, sample_rate: int = 16_000) -> bytes:
    return bytes(2 * int(sample_rate * ms / 1000))


def rms(pcm16: bytes) -> float:
    """Root mean square of PCM16 little-endian samples. In C (``audioop``, as the phone
    door's codecs): the fake recogniser runs it on every frame, and the load benchmark
    measures the platform (a cloud recogniser's adapter only forwards the bytes), not this
    fake, as a Python loop over the samples made it."""
    pcm16 = pcm16[: len(pcm16) - len(pcm16) % 2]
    if _BIG_ENDIAN:
        pcm16 = audioop.byteswap(pcm16, 2)
    return float(audioop.rms(pcm16, 2))


_BIG_ENDIAN = array("h", [1]).tobytes()[0] == 0


def _little_endian(samples: array[int]) -> bytes:
    if _BIG_ENDIAN:
        samples.byteswap()
    return samples.tobytes()


# ---------------------------------------------------------------- LLM


@dataclass(frozen=True)
class Delay:
    """Pause the scripted stream (simulates a slow model between chunks)."""

    seconds: float


@dataclass(frozen=True)
class LLMRequest:
    """What the fake LLM was asked, copied at call time (history mutates later)."""

    messages: list[dict[str, Any]]
    tools: list[ToolSpec]
    model: str | None


# One round: text chunks, tool calls, delays, and exceptions (raised where they stand).
RoundItem = str | ToolCall | Delay | BaseException
Round = Sequence[RoundItem] | str


def tool_call(
    name: str, arguments: dict[str, Any] | str | None = None, *, id: str = ""
) -> ToolCall:
    """A ToolCall with JSON arguments; ``id`` defaults to one derived from the name."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(id=id or f"call_{name}", name=name, arguments=raw)


class FakeLLM(LLM):
    """Plays scripted rounds, one per ``stream`` call; without a script (or past its end)
    it echoes the last user message.

    >>> FakeLLM(script=[[tool_call("get_weather", {"city": "Paris"})], ["It is ", "sunny."]])
    """

    name = "fake"
    capabilities = Capabilities(tools=True, offline=True)

    def __init__(
        self,
        script: Iterable[Round] | None = None,
        *,
        chunk_delay: float = 0.0,
        **_options: Any,
    ) -> None:
        self.script: list[Round] = list(script or [])
        self.chunk_delay = chunk_delay
        self.requests: list[LLMRequest] = []
        self.completed_rounds = 0
        self.closed = False

    async def stream(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[ToolSpec],
        model: str | None = None,
    ) -> AsyncIterator[LLMEvent]:
        index = len(self.requests)
        self.requests.append(LLMRequest(copy.deepcopy(messages), list(tools), model))
        round_ = self.script[index] if index < len(self.script) else self._echo(messages)
        items: Sequence[RoundItem] = [round_] if isinstance(round_, str) else round_
        calls: list[ToolCall] = []
        for item in items:
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, Delay):
                await asyncio.sleep(item.seconds)
            elif isinstance(item, ToolCall):
                calls.append(item)
            else:
                if self.chunk_delay:
                    await asyncio.sleep(self.chunk_delay)
                yield TextDelta(item)
        if calls:
            yield ToolCallsRequested(tuple(calls))
        self.completed_rounds += 1
        yield LLMDone("tool_calls" if calls else "stop")

    @staticmethod
    def _echo(messages: list[dict[str, Any]]) -> list[str]:
        said = next(
            (m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), ""
        )
        words = f"You said: {said}".strip().split(" ")
        return [word + " " for word in words[:-1]] + [words[-1]]

    async def aclose(self) -> None:
        self.closed = True


# ---------------------------------------------------------------- STT


class FakeSTTStream(STTStream):
    """Frames whose RMS exceeds the threshold are speech. Speech start emits
    SpeechStarted, every ``partial_every_ms`` of speech a PartialTranscript (the next
    text, one more word each time), and ``silence_ms`` of quiet after speech emits the
    FinalTranscript. ``inject`` and ``fail`` let tests drive it directly."""

    def __init__(self, owner: FakeSTT, sample_rate: int) -> None:
        self._owner = owner
        self.sample_rate = sample_rate
        self._queue: asyncio.Queue[STTEvent | BaseException | None] = asyncio.Queue()
        self._in_speech = False
        self._speech_ms = 0.0
        self._silence_ms = 0.0
        self._partials = 0
        self._last_speech_at = 0.0
        self.received_bytes = 0
        self.closed = False

    async def push_audio(self, pcm16: bytes) -> None:
        if self.closed:
            raise ProviderError("stream is closed", code=ErrorCode.STT_FAILED)
        self.received_bytes += len(pcm16)
        frame_ms = 1000 * (len(pcm16) // 2) / self.sample_rate
        if rms(pcm16) >= self._owner.threshold:
            self._on_speech(frame_ms)
        elif self._in_speech:
            self._silence_ms += frame_ms
            if self._silence_ms >= self._owner.silence_ms:
                self._in_speech = False
                self.inject(
                    FinalTranscript(
                        self._owner.next_text(),
                        speech_end_at=self._last_speech_at,
                        endpoint_at=time.monotonic(),
                    )
                )

    def _on_speech(self, frame_ms: float) -> None:
        if not self._in_speech:
            self._in_speech = True
            self._speech_ms = self._silence_ms = 0.0
            self._partials = 0
            self.inject(SpeechStarted())
        self._silence_ms = 0.0
        self._last_speech_at = time.monotonic()
        self._speech_ms += frame_ms
        due = int(self._speech_ms // self._owner.partial_every_ms)
        while self._partials < due:
            self._partials += 1
            words = self._owner.peek_text().split()
            self.inject(PartialTranscript(" ".join(words[: self._partials])))

    def inject(self, event: STTEvent) -> None:
        self._queue.put_nowait(event)

    def fail(self, error: BaseException) -> None:
        """Make ``events()`` raise ``error`` after the events already queued."""
        self._queue.put_nowait(error)

    async def events(self) -> AsyncIterator[STTEvent]:
        while (item := await self._queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item

    async def aclose(self) -> None:
        if not self.closed:
            self.closed = True
            self._queue.put_nowait(None)


class FakeSTT(STT):
    name = "fake"
    capabilities = Capabilities(
        offline=True, sample_rate=16_000, languages=languages.ANY, detects_language=True
    )

    def __init__(
        self,
        texts: Sequence[str] = ("hello",),
        *,
        threshold: float = 500.0,
        silence_ms: float = 500.0,
        partial_every_ms: float = 200.0,
        open_error: ProviderError | None = None,
        open_delay: float = 0.0,
        **_options: Any,
    ) -> None:
        self.open_delay = open_delay
        self._texts = itertools.cycle(list(texts) or ["hello"])
        self._current = next(self._texts)
        self.threshold = threshold
        self.silence_ms = silence_ms
        self.partial_every_ms = partial_every_ms
        self.open_error = open_error
        self.streams: list[FakeSTTStream] = []

    def peek_text(self) -> str:
        return self._current

    def next_text(self) -> str:
        text, self._current = self._current, next(self._texts)
        return text

    async def open(self, *, sample_rate: int) -> FakeSTTStream:
        if self.open_delay:
            await asyncio.sleep(self.open_delay)  # a provider still connecting
        if self.open_error is not None:
            raise self.open_error
        stream = FakeSTTStream(self, sample_rate)
        self.streams.append(stream)
        return stream


# ---------------------------------------------------------------- TTS


class FakeTTS(TTS):
    """A quiet tone, ``ms_per_char`` long per character, in ``chunks`` pieces."""

    name = "fake"
    capabilities = Capabilities(
        offline=True, sample_rate=24_000, languages=languages.ANY, detects_language=True
    )

    def __init__(
        self,
        *,
        sample_rate: int = 24_000,
        ms_per_char: float = 10.0,
        chunks: int = 3,
        chunk_delay: float = 0.0,
        first_byte_delay: float = 0.0,
        error: ProviderError | None = None,
        voices: tuple[str, ...] | None = None,
        **_options: Any,
    ) -> None:
        self.capabilities = Capabilities(
            offline=True,
            sample_rate=sample_rate,
            voices=voices,
            languages=languages.ANY,
            detects_language=True,
        )
        self.first_byte_delay = first_byte_delay
        self.sample_rate = sample_rate
        self.ms_per_char = ms_per_char
        self.chunks = max(1, chunks)
        self.chunk_delay = chunk_delay
        self.error = error
        self.requests: list[tuple[str, str | None]] = []

    def audio_for(self, text: str) -> bytes:
        return tone_pcm(
            len(text) * self.ms_per_char, sample_rate=self.sample_rate, amplitude=2000, hz=220
        )

    async def synthesize(self, text: str, *, voice: str | None = None) -> AsyncIterator[bytes]:
        self.requests.append((text, voice))
        if self.error is not None:
            raise self.error
        audio = self.audio_for(text)
        if self.first_byte_delay:
            await asyncio.sleep(self.first_byte_delay)
        size = -(-len(audio) // self.chunks)
        size += size % 2  # keep samples whole
        for start in range(0, len(audio), max(size, 2)):
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            yield audio[start : start + size]


# ---------------------------------------------------------------- tools


ToolHandler = Callable[[dict[str, Any]], Any | Awaitable[Any]]


def _ok(_arguments: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True}


@dataclass
class FakeToolRunner(ToolRunner):
    """Runs server tools as Python callables, in process.

    A handler returns any JSON value (or an awaitable of one); raising makes the call
    fail with the exception's message. Unknown tools answer ``{"ok": true}``.
    """

    handlers: dict[str, ToolHandler] = field(default_factory=dict)
    reply_channel: str = ""  # accepted like the real runner's; unused in process
    delay: float = 0.0
    invocations: list[ToolRequest] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)  # call ids, in completion order
    running: int = 0
    max_running: int = 0

    async def run(self, invocation: ToolRequest) -> ToolResult:
        self.invocations.append(invocation)
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            handler: ToolHandler = self.handlers.get(invocation.name, _ok)
            result = handler(invocation.arguments)
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                result = await result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return ToolResult(ToolStatus.FAILED, error=str(exc) or type(exc).__name__)
        finally:
            self.running -= 1
        self.finished.append(invocation.call_id)
        return ToolResult(ToolStatus.COMPLETED, result=json.dumps(result))


# Scripted engines for the tests: the registry loads this module where ALLOW_FAKE_PROVIDERS
# is on, and refuses them to settings and agents where it is off.
FAKE_STT = ProviderSpec(
    kind="stt", name="fake", label="Scripted (tests)", adapter=FakeSTT, test_only=True
)
FAKE_LLM = ProviderSpec(
    kind="llm", name="fake", label="Scripted (tests)", adapter=FakeLLM, test_only=True
)
FAKE_TTS = ProviderSpec(
    kind="tts", name="fake", label="Scripted (tests)", adapter=FakeTTS, test_only=True
)
FAKE_TOOLS = ProviderSpec(
    kind="tools", name="fake", label="Scripted (tests)", adapter=FakeToolRunner, test_only=True
)

for _spec in (FAKE_STT, FAKE_LLM, FAKE_TTS, FAKE_TOOLS):
    registry.register(_spec.kind, _spec.name, _spec)
