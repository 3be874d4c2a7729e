"""A session's audio, both sides, as one two-channel recording (docs/privacy.md, "Recordings").

``DoorAudio`` (the seam every door's audio passes) hands a ``AudioCapture`` what the caller
said, as the door decoded it and before speech-to-text hears it (PCM16 at 16 kHz), and
what the agent said, as it goes to the door (PCM16 at the session's TTS rate, resampled
here to 16 kHz). Each side is spooled to a temporary file of its own, never held whole in
memory, on one timeline that starts when the capture does:

- the caller's audio arrives as it is spoken: a gap longer than ``GAP_S`` (a muted
  microphone, a connection that was lost and resumed) is filled with silence up to the
  clock, shorter gaps (network jitter) are not, so speech is never cut by inserted silence;
- the agent's audio arrives faster than it is played (the peer buffers it): a reply starts
  at the clock or where the previous one ends, whichever is later; a barge-in (``cut``)
  drops what was sent but not yet played by the clock, as the peer dropped it.

Each channel stops at ``max_seconds``; ``wav_chunks`` then streams a stereo WAV (left: the
caller, right: the agent) block by block, the shorter channel padded with silence. Silence
on the timeline extends the spool file without writing it (an hour's pause costs no memory
and no time on the event loop). A spool that cannot be written (the disk is full) ends the
recording, never the session: the capture says ``failed`` and keeps nothing.
"""

from __future__ import annotations

import contextlib
import struct
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import IO

import numpy as np

from engine.doors.audio import Resampler

__all__ = ["RATE", "AudioCapture", "wav_header"]

RATE = 16_000  # both channels; what speech-to-text hears
SAMPLE_BYTES = 2
GAP_S = 0.25  # a caller's gap longer than this is silence on the timeline
BLOCK_SAMPLES = 32_768  # per channel, per block of the WAV written out
CALLER, AGENT = 0, 1


def wav_header(*, frames: int, channels: int = 2, rate: int = RATE) -> bytes:
    """A canonical 44-byte PCM16 WAV header for ``frames`` samples per channel."""
    block = channels * SAMPLE_BYTES
    data = frames * block
    return b"".join((
        b"RIFF", struct.pack("<I", 36 + data), b"WAVE",
        b"fmt ", struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * block, block, 16),
        b"data", struct.pack("<I", data),
    ))  # fmt: skip


def _resize(spool: IO[bytes], size: int) -> None:
    """Cut the spool to ``size`` bytes, or extend it with zeros, and write on from there."""
    spool.truncate(size)
    spool.seek(size)


class AudioCapture:
    """Two channels on one clock, spooled under ``spool_dir`` (see the module)."""

    def __init__(
        self, *, spool_dir: str, max_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self._clock = clock
        self._started = clock()
        self.started_at = time.time()  # wall clock, for the transcript's timestamps
        self._max = int(max_seconds * RATE)
        self._spools: tuple[IO[bytes], IO[bytes]] = (
            tempfile.TemporaryFile(dir=spool_dir, prefix="rec-"),
            tempfile.TemporaryFile(dir=spool_dir, prefix="rec-"),
        )
        self._written = [0, 0]  # samples per channel
        self._agent_rate = 0
        self._resample = Resampler(RATE, RATE)
        self.truncated = False  # a channel reached ``max_seconds``
        self.failed = False  # a spool could not be written: nothing is kept
        self.closed = False

    # ---------------------------------------------------------------- from the seam

    def caller(self, pcm: bytes) -> None:
        """The caller's audio, PCM16 at 16 kHz."""
        now = self._now()
        if now - self._written[CALLER] > GAP_S * RATE:
            self._pad(CALLER, now)
        self._append(CALLER, pcm)

    def agent(self, pcm: bytes, *, rate: int) -> None:
        """The agent's audio as sent to the door, PCM16 at ``rate``."""
        now = self._now()
        if rate != self._agent_rate or now > self._written[AGENT]:
            # A new reply (what came before has played) or a new rate: the filter's tail
            # belongs to the audio before, not after the silence.
            self._append(AGENT, self._resample.flush())
            self._agent_rate, self._resample = rate, Resampler(rate, RATE)
        self._pad(AGENT, now)
        self._append(AGENT, self._resample(pcm))

    def cut(self) -> None:
        """A barge-in: what the agent sent beyond the clock was never played."""
        now = self._now()
        if self.closed or self._written[AGENT] <= now:
            return
        if self._spooled(AGENT, lambda spool: _resize(spool, now * SAMPLE_BYTES)):
            self._written[AGENT] = now

    # ---------------------------------------------------------------- the result

    @property
    def frames(self) -> int:
        return max(self._written)

    @property
    def duration_ms(self) -> int:
        return self.frames * 1000 // RATE

    def finish(self) -> None:
        """The end of the session: what the agent's resampler still holds is written."""
        self._append(AGENT, self._resample.flush())
        self._resample = Resampler(RATE, RATE)

    def wav_size(self) -> int:
        return 44 + self.frames * 2 * SAMPLE_BYTES

    def wav_chunks(self) -> Iterator[bytes]:
        """The stereo WAV, block by block (left: caller, right: agent)."""
        self.finish()
        frames = self.frames
        yield wav_header(frames=frames)
        for spool in self._spools:
            spool.flush()
            spool.seek(0)
        for _ in range(0, frames, BLOCK_SAMPLES):
            left, right = (self._block(spool) for spool in self._spools)
            length = max(len(left), len(right))
            block = np.zeros((length, 2), dtype="<i2")
            block[: len(left), 0], block[: len(right), 1] = left, right
            yield block.tobytes()

    def close(self) -> None:
        """Delete the spooled audio."""
        self.closed = True
        for spool in self._spools:
            with contextlib.suppress(OSError):  # what it still buffered cannot be written
                spool.close()

    # ---------------------------------------------------------------- inside

    def _now(self) -> int:
        return min(int((self._clock() - self._started) * RATE), self._max)

    def _block(self, spool: IO[bytes]) -> np.ndarray:
        return np.frombuffer(spool.read(BLOCK_SAMPLES * SAMPLE_BYTES), dtype="<i2")

    def _pad(self, channel: int, until: int) -> None:
        """Silence up to ``until``: the file extended (a hole the disk does not store)."""
        if until > self._written[channel] and self._spooled(
            channel, lambda spool: _resize(spool, until * SAMPLE_BYTES)
        ):
            self._written[channel] = until

    def _append(self, channel: int, pcm: bytes) -> None:
        room = self._max - self._written[channel]
        if len(pcm) // SAMPLE_BYTES > room:
            self.truncated = True
            pcm = pcm[: room * SAMPLE_BYTES]
        self._write(channel, pcm[: len(pcm) // SAMPLE_BYTES * SAMPLE_BYTES])

    def _write(self, channel: int, pcm: bytes) -> None:
        if pcm and self._spooled(channel, lambda spool: spool.write(pcm)):
            self._written[channel] += len(pcm) // SAMPLE_BYTES

    def _spooled(self, channel: int, operation: Callable[[IO[bytes]], object]) -> bool:
        """Run ``operation`` on the channel's spool; False when the capture is closed, or
        fails now (then the spool is dropped, its disk freed)."""
        if self.closed:
            return False
        try:
            operation(self._spools[channel])
        except OSError:
            self.failed = True
            self.close()
            return False
        return True
