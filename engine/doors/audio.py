"""Audio between a door's own format and the session's: G.711 μ-law and resampling.

The session hears PCM16 at ``CLIENT_SAMPLE_RATE`` (16 kHz) and speaks PCM16 at its TTS
rate (24 kHz for most voices). A door says what its line carries (``AudioFormat``); an
``AudioConverter`` turns one stream into the other, chunk by chunk. A format equal to the
session's converts nothing (the browser's microphone audio passes through untouched).

- μ-law: the standard library's ``audioop`` (the ITU-T G.711 tables, in C). ``audioop``
  is deprecated since Python 3.11 and removed in 3.13; there the ``audioop-lts`` package
  provides the same module under the same name. On 3.11 it warns once at import, which
  is silenced here (the warning is the deprecation itself, not a defect of a call).
- rates: ``soxr`` streams (the SoX resampler), whose filter state is kept across chunks
  so a reply cut into 20 ms frames has no clicks at the seams.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import soxr

from engine.protocol import CLIENT_SAMPLE_RATE

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop  # G.711 in C; audioop-lts on Python 3.13+

__all__ = [
    "SESSION_INPUT",
    "AudioConverter",
    "AudioEncoding",
    "AudioFormat",
    "Resampler",
    "pcm_to_ulaw",
    "ulaw_to_pcm",
]


class AudioEncoding(StrEnum):
    PCM16 = "pcm16"  # signed 16-bit little-endian, mono
    MULAW = "mulaw"  # G.711 μ-law, one byte a sample, mono


@dataclass(frozen=True)
class AudioFormat:
    encoding: AudioEncoding
    rate: int

    @property
    def bytes_per_second(self) -> int:
        return self.rate * (2 if self.encoding is AudioEncoding.PCM16 else 1)


SESSION_INPUT = AudioFormat(AudioEncoding.PCM16, CLIENT_SAMPLE_RATE)


def ulaw_to_pcm(ulaw: bytes) -> bytes:
    return audioop.ulaw2lin(ulaw, 2)


def pcm_to_ulaw(pcm: bytes) -> bytes:
    return audioop.lin2ulaw(pcm[: len(pcm) // 2 * 2], 2)


class Resampler:
    """PCM16 mono from one rate to another, streaming (soxr keeps the filter's state)."""

    def __init__(self, rate_in: int, rate_out: int) -> None:
        self._stream = (
            None
            if rate_in == rate_out
            else soxr.ResampleStream(rate_in, rate_out, 1, dtype="int16", quality="HQ")
        )

    def __call__(self, pcm: bytes) -> bytes:
        if self._stream is None or not pcm:
            return pcm
        samples = np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype=np.int16)
        return bytes(self._stream.resample_chunk(samples).tobytes())

    def flush(self) -> bytes:
        """What the filter still holds, at the end of the stream."""
        if self._stream is None:
            return b""
        empty = np.zeros(0, dtype=np.int16)
        return bytes(self._stream.resample_chunk(empty, last=True).tobytes())


class AudioConverter:
    """One direction of one door's audio: ``source`` chunks in, ``target`` chunks out."""

    def __init__(self, source: AudioFormat, target: AudioFormat) -> None:
        self.source, self.target = source, target
        self._decode = source.encoding is AudioEncoding.MULAW
        self._encode = target.encoding is AudioEncoding.MULAW
        self._resample = Resampler(source.rate, target.rate)

    @property
    def passthrough(self) -> bool:
        return self.source == self.target

    def __call__(self, chunk: bytes) -> bytes:
        if self.passthrough or not chunk:
            return chunk
        pcm = ulaw_to_pcm(chunk) if self._decode else chunk
        pcm = self._resample(pcm)
        return pcm_to_ulaw(pcm) if self._encode and pcm else pcm
