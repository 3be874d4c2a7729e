"""Speech out: sentences queue up, are cleaned for speech, synthesized and sent as audio.

Also what the user heard of it: when a turn is interrupted, history keeps only the
sentences that started playing (narrowed by the client's ``playedMs``; else by the door's
own account of what its peer played, a carrier's echoed marks; else by our estimate of its
playback) followed by ``INTERRUPTED_MARK``.

``SpeechOutput`` is given only what it needs: the config, the TTS, the usage meter, and
callables to emit events, send audio, report errors, spawn tasks, read the clock and ask
the door how much it played (``Door.played_ms``). The session owns it; the turn hands it
the history to cut.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

from engine.protocol import ErrorCode, TtsDoneEvent
from engine.providers.base import TTS, ProviderError
from engine.providers.resilience import Report, ResilientTTS
from engine.session.config import SessionConfig
from engine.session.state import Sentence, Turn, closing_stream
from engine.session.tools import Emit, Spawn
from engine.session.usage import UsageMeter
from engine.text.voice_cleaner import clean_for_speech

INTERRUPTED_MARK = "[interrupted]"
FRAME_MAX_MS = 100  # audio goes out in frames of at most this length


class SpeechOutput:
    def __init__(
        self,
        *,
        config: SessionConfig,
        tts: ResilientTTS | None,
        usage: UsageMeter,
        emit: Emit,
        send_audio: Callable[[bytes], Awaitable[None]],
        handle_error: Callable[[ErrorCode, str], Coroutine[Any, Any, None]],
        spawn: Spawn,
        clock: Callable[[], float],
        played: Callable[[], float | None] | None = None,
    ) -> None:
        self.config, self._tts, self._usage = config, tts, usage
        self._played = played
        self._emit, self._send_audio = emit, send_audio
        self._handle_error, self._spawn, self._clock = handle_error, spawn, clock
        # Speech synthesized ahead (the greeting's first sentence, before `ready`), by text.
        self._prepared: dict[str, asyncio.Task[list[bytes]]] = {}

    @property
    def speaks(self) -> bool:
        return self.config.mode == "voice" and self._tts is not None

    @property
    def prepared(self) -> list[asyncio.Task[list[bytes]]]:
        """Speech synthesized ahead and not said yet (the session cancels it on close)."""
        return list(self._prepared.values())

    @property
    def _voice(self) -> str | None:
        """The voice to ask for: the configured one when the TTS has it, else its default."""
        voice = (self.config.voice or "").strip()
        return voice if voice and unavailable_voice(self._tts, voice) is None else None

    async def check_voice(self) -> None:
        """Say once, at the start, that the configured voice cannot be honoured."""
        voice = (self.config.voice or "").strip()
        problem = unavailable_voice(self._tts, voice) if self.speaks and voice else None
        if problem is not None:
            await self._handle_error(ErrorCode.VOICE_UNAVAILABLE, problem)

    def warm(self) -> asyncio.Task[None] | None:
        """Let the TTS get ready (open its socket) while the greeting is prepared."""
        if not self.speaks or self._tts is None:
            return None
        return self._spawn("warming the voice", self._tts.warm, self._voice)

    async def aclose(self) -> None:
        """The session ended: the TTS closes what it kept open (its socket)."""
        if self._tts is not None:
            await self._tts.aclose()

    async def prepare(self, text: str, *, wait_s: float) -> None:
        """Synthesize ``text``, a sentence to be said soon, waiting for it up to ``wait_s``;
        past that it goes on in the background."""
        speech = clean_for_speech(text)
        if self._tts is None or not speech.strip() or speech in self._prepared:
            return
        task = asyncio.create_task(self._synthesized(speech))
        # A failure is reported when the sentence is said; if it never is, it is dropped.
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._prepared[speech] = task
        await asyncio.wait({task}, timeout=wait_s)

    async def _synthesized(self, speech: str) -> list[bytes]:
        assert self._tts is not None
        async with closing_stream(self._tts.synthesize(speech, voice=self._voice)) as audio:
            return [chunk async for chunk in audio]

    async def _audio_of(self, speech: str, report: Report | None) -> AsyncIterator[bytes]:
        """The sentence's audio: prepared ahead if it was, else synthesized now."""
        prepared = self._prepared.pop(speech, None)
        if prepared is not None:
            for chunk in await prepared:
                yield chunk
            return
        assert self._tts is not None
        stream = self._tts.synthesize(speech, voice=self._voice, report=report)
        async with closing_stream(stream) as audio:
            async for chunk in audio:
                yield chunk

    def say(self, turn: Turn, text: str) -> None:
        sentence = Sentence(turn.round, text)
        turn.sentences.append(sentence)
        turn.speech_queue.put_nowait(sentence)
        if turn.speech_task is None:
            turn.speech_task = self._spawn("speech", self._speak, turn)

    async def finish(
        self, turn: Turn, *, sent: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """The turn says nothing more: once its audio is all sent, ``sent`` (if given),
        then ``tts_done``."""
        if turn.speech_task is not None:
            turn.speech_queue.put_nowait(None)
            await turn.speech_task
        if sent is not None:
            await sent()
        await self._emit(TtsDoneEvent())

    async def _speak(self, turn: Turn) -> None:
        assert self._tts is not None
        while (sentence := await turn.speech_queue.get()) is not None:
            if turn.tts_failed:
                continue  # reported once; the text still reached the screen
            speech = clean_for_speech(sentence.text)
            sentence.start_ms = turn.audio_ms
            if not speech.strip():
                continue
            if turn.metrics is not None and turn.metrics.first_tts_request_at is None:
                turn.metrics.first_tts_request_at = self._clock()
            self._usage.tts_characters += len(speech)
            try:
                report = turn.metrics.tts.add if turn.metrics is not None else None
                async with closing_stream(self._audio_of(speech, report)) as audio:
                    async for chunk in audio:
                        self._usage.tts_audio_bytes += len(chunk)
                        metrics = turn.metrics
                        if metrics is not None and metrics.first_tts_byte_at is None and chunk:
                            metrics.first_tts_byte_at = self._clock()
                        await self._play(turn, chunk)
            except ProviderError as exc:
                turn.tts_failed = True
                await turn.live.wait()  # a held reply's failure is said once it is released
                await self._handle_error(ErrorCode.TTS_FAILED, str(exc))

    async def _play(self, turn: Turn, chunk: bytes) -> None:
        """Send ``chunk`` in frames of at most ``FRAME_MAX_MS``."""
        frame_bytes = self.config.tts_sample_rate * FRAME_MAX_MS // 1000 * 2
        for start in range(0, len(chunk), frame_bytes):
            await self._send_frame(turn, chunk[start : start + frame_bytes])

    async def _send_frame(self, turn: Turn, frame: bytes) -> None:
        if not turn.live.is_set():  # a held reply (preemptive generation): its first
            await turn.live.wait()  # audio waits here, synthesized, until it is released
        if turn.first_audio_at is None:
            turn.first_audio_at = self._clock()
            if turn.metrics is not None:
                turn.metrics.first_audio_at = turn.first_audio_at
        await self._send_audio(frame)
        frame_ms = len(frame) * 1000 / (2 * self.config.tts_sample_rate)
        turn.audio_ms += frame_ms
        # Playback runs in real time from the first frame and stalls when audio runs out.
        turn.playback_end = max(turn.playback_end, self._clock()) + frame_ms / 1000

    # ------------------------------------------------------------ what the user heard

    def playing(self, turn: Turn) -> bool:
        """Whether the client is probably still playing audio we sent."""
        return self._clock() < turn.playback_end

    def played_ms(self, turn: Turn) -> float | None:
        """How much of ``turn``'s audio the user heard: the door's account when it keeps
        one (a phone call's marks), else our estimate of the client's playback."""
        if not self.speaks:
            return None
        heard = self._played() if self._played is not None else None
        if heard is not None:
            return min(heard, turn.audio_ms)
        unplayed_ms = max(0.0, turn.playback_end - self._clock()) * 1000
        return max(0.0, turn.audio_ms - unplayed_ms)

    def cut_history(
        self, turn: Turn, played_ms: float | None, history: list[dict[str, Any]]
    ) -> None:
        """Keep in ``history`` only the part of this round's reply the user got."""
        if turn.round_open:
            turn.round_open = False
            kept = self._kept_text(turn, played_ms) if self.speaks else turn.round_text
            if turn.round_text:
                history.append({"role": "assistant", "content": _interrupted(kept)})
        elif turn.message is not None and self.speaks:
            round_sentences = [s for s in turn.sentences if s.round == turn.round]
            if not all(_heard(s, played_ms) for s in round_sentences):
                turn.message["content"] = _interrupted(self._kept_text(turn, played_ms))

    def _kept_text(self, turn: Turn, played_ms: float | None) -> str:
        return " ".join(
            s.text for s in turn.sentences if s.round == turn.round and _heard(s, played_ms)
        )


def unavailable_voice(tts: TTS | None, voice: str) -> str | None:
    """Why ``tts`` cannot speak with ``voice`` (None: it can, or it takes any name)."""
    if tts is None:
        return None
    voices = tts.capabilities.voices
    if voices is None or voice.lower() in voices:
        return None
    return (
        f"text-to-speech {tts.name!r} has no voice {voice[:40]!r}, so it speaks with "
        f"{voices[0]!r}; its voices: {', '.join(voices)}"
    )


def _heard(sentence: Sentence, played_ms: float | None) -> bool:
    if sentence.start_ms is None:
        return False
    return played_ms is None or sentence.start_ms < played_ms


def _interrupted(kept: str) -> str:
    kept = kept.rstrip()
    return f"{kept} {INTERRUPTED_MARK}" if kept else INTERRUPTED_MARK
