"""Speech in: the recogniser's stream, its transcripts, and when the user's words
interrupt the agent (barge-in) rather than acknowledge it ("mm-hmm").

``SpeechInput`` is owned by the session and given what it needs: the config, the STT,
the usage meter, the ``Turns`` (to begin and interrupt turns) and the ``SpeechOutput``
(whether audio still plays), and callables to emit, report errors, spawn tasks, read the
clock, mark the user active and ask whether the session is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from engine import protocol
from engine.protocol import ErrorCode, TranscriptEvent
from engine.providers.base import (
    STT,
    FinalTranscript,
    LikelyEndOfTurn,
    PartialTranscript,
    ProviderError,
    SpeechStarted,
    STTEvent,
    STTStream,
)
from engine.session.config import SessionConfig
from engine.session.speech import SpeechOutput
from engine.session.state import closing_stream, log_failure
from engine.session.tools import Emit, Spawn
from engine.session.turns import Turns
from engine.session.usage import UsageMeter
from engine.text.words import words_of

# Words that acknowledge rather than interrupt ("mm-hmm", "okay", "I see").
BACKCHANNEL_WORDS = frozenset(
    "mm mmm hmm mhm uh huh um ah aha oh ok okay yeah yep yes right sure alright i see "
    "got it cool nice great".split()
)
_EARLY_AUDIO_MAX = 500  # frames kept while the recogniser connects (10 s of 20 ms frames)


class SpeechInput:
    def __init__(
        self,
        *,
        config: SessionConfig,
        stt: STT | None,
        usage: UsageMeter,
        turns: Turns,
        speech: SpeechOutput,
        emit: Emit,
        handle_error: Callable[[ErrorCode, str], Coroutine[Any, Any, None]],
        spawn: Spawn,
        clock: Callable[[], float],
        active: Callable[[], None],
        closed: Callable[[], bool],
    ) -> None:
        self.config, self._stt, self._usage = config, stt, usage
        self._turns, self._speech = turns, speech
        self._emit, self._handle_error, self._spawn = emit, handle_error, spawn
        self._clock, self._active, self._closed = clock, active, closed
        self._stream: STTStream | None = None
        self._task: asyncio.Task[None] | None = None
        self._opening = False
        self._early_audio: list[bytes] = []
        self._audio_refused = False

    async def push(self, pcm: bytes) -> None:
        """A microphone frame (PCM16 at the client rate), for the recogniser."""
        if self._closed():
            return
        if self.config.mode != "voice" or self._stt is None:
            if not self._audio_refused:
                self._audio_refused = True
                if self.config.mode != "voice":
                    await self._handle_error(
                        ErrorCode.NOT_VOICE_MODE, "audio is ignored in text mode"
                    )
                else:
                    await self._handle_error(
                        ErrorCode.STT_FAILED, "no speech recognition is configured"
                    )
            return
        stream = self._stream
        if stream is None:
            if self._opening and len(self._early_audio) < _EARLY_AUDIO_MAX:
                self._early_audio.append(pcm)  # the recogniser is still connecting
            return
        try:
            await stream.push_audio(pcm)
        except ProviderError as exc:
            await self._failed(stream, exc)
        else:
            self._usage.stt_audio_bytes += len(pcm)

    async def open(self) -> None:
        if self._stt is None:
            return
        self._opening = True
        try:
            stream = await self._stt.open(sample_rate=protocol.CLIENT_SAMPLE_RATE)
        except ProviderError as exc:
            await self._handle_error(ErrorCode.STT_FAILED, str(exc))
            return
        finally:
            self._opening = False
        self._stream = stream
        self._task = self._spawn("speech recognition", self._consume, stream)
        early, self._early_audio = self._early_audio, []
        for pcm in early:  # what the microphone sent while the recogniser was connecting
            await self.push(pcm)

    async def _consume(self, stream: STTStream) -> None:
        try:
            async with closing_stream(stream.events()) as events:
                async for event in events:
                    try:
                        await self._on_event(event)
                    except Exception as exc:  # one bad event must not end transcription
                        log_failure(self.config.session_id, "a speech event", exc)
                        await self._handle_error(ErrorCode.INTERNAL, "internal error")
        except ProviderError as exc:
            await self._failed(stream, exc)

    async def _failed(self, stream: STTStream, exc: ProviderError) -> None:
        if self._stream is not stream:
            return  # already reported
        self._stream = None
        await self._handle_error(ErrorCode.STT_FAILED, str(exc))
        with contextlib.suppress(Exception):
            await stream.aclose()

    async def _on_event(self, event: STTEvent) -> None:
        self._active()
        if isinstance(event, SpeechStarted):
            await self._turns.withdraw()  # the user speaks (again): a held reply is wrong
            if self.config.barge_in_min_words <= 0:
                await self._barge_in()
        elif isinstance(event, PartialTranscript):
            if event.text.strip():
                await self._turns.withdraw()
                await self._emit(TranscriptEvent(text=event.text))
                if self._interrupts(event.text):
                    await self._barge_in()
        elif isinstance(event, LikelyEndOfTurn):
            text = event.text.strip()
            if text and (not self._agent_speaking() or self._interrupts(text)):
                await self._turns.speculate(text)  # the reply starts, held back
        elif isinstance(event, FinalTranscript):
            if not event.text.strip() or (
                self._agent_speaking() and not self._interrupts(event.text)
            ):
                await self._turns.withdraw()
                return  # "mm-hmm" while the agent talks: a backchannel, not a turn
            await self._barge_in()
            await self._turns.begin(
                event.text.strip(),
                "speech",
                self._clock(),
                speech_end_at=event.speech_end_at,
                endpoint_at=event.endpoint_at,
            )

    def _interrupts(self, text: str) -> bool:
        """Whether the user's words while the agent speaks are meant to interrupt it."""
        words = [w for w in words_of(text) if w not in BACKCHANNEL_WORDS]
        return len(words) >= max(1, self.config.barge_in_min_words)

    async def _barge_in(self) -> None:
        async with self._turns.control_lock:
            if self._agent_speaking():
                await self._turns.interrupt("barge_in", None)

    def _agent_speaking(self) -> bool:
        turn = self._turns.current
        if turn is None or turn.first_audio_at is None:
            return False
        return not turn.finished or self._speech.playing(turn)

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The task reading the recogniser's events (the session cancels it on close)."""
        return self._task

    async def close(self) -> None:
        """Close the recogniser's stream (after its task was cancelled)."""
        if self._stream is not None:
            stream, self._stream = self._stream, None
            with contextlib.suppress(Exception):
                await stream.aclose()
