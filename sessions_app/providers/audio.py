"""What the offline speech engines share: PCM16 conversion, resampling, and a model
loaded once per process.

Resampling uses soxr (the SoX resampler), never a hand-written interpolation.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import numpy as np
import soxr

from sessions_app.protocol import ErrorCode
from sessions_app.providers.base import ProviderError

logger = logging.getLogger(__name__)

PCM16_MAX = 32767


def pcm16_to_float(pcm16: bytes) -> np.ndarray:
    """PCM16 little-endian bytes → float32 samples in [-1, 1]."""
    usable = len(pcm16) - len(pcm16) % 2
    samples = np.frombuffer(pcm16[:usable], dtype="<i2")
    return samples.astype(np.float32) / 32768.0


def float_to_pcm16(samples: np.ndarray) -> bytes:
    """float samples in [-1, 1] → PCM16 little-endian bytes (clipped)."""
    clipped = np.clip(samples, -1.0, 1.0) * PCM16_MAX
    pcm16: bytes = np.rint(clipped).astype("<i2").tobytes()
    return pcm16


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """One whole buffer of float32 mono samples at another rate."""
    if from_rate == to_rate or samples.size == 0:
        return samples.astype(np.float32, copy=False)
    resampled: np.ndarray = soxr.resample(
        samples.astype(np.float32, copy=False), from_rate, to_rate
    )
    return resampled


class OfflineModel:
    """A model loaded once per process, on first use (or ahead of it on ``executor``).

    A failed load is remembered: every use raises the same ``ProviderError`` at once,
    saying what to install, instead of trying again on every call.
    """

    def __init__(
        self, load: Callable[[], Any], *, executor: Executor, failure: str, code: ErrorCode
    ) -> None:
        self._load, self._executor = load, executor
        self._failure, self._code = failure, code
        self._lock = threading.Lock()
        self._model: Any = None
        self._failed = False

    def preload(self) -> None:
        """Start loading on the executor's thread, so the first session waits less."""
        if self._model is None and not self._failed:
            self._executor.submit(self.get)

    def get(self) -> Any:
        with self._lock:
            if self._model is None and not self._failed:
                try:
                    self._model = self._load()
                except Exception as exc:  # a missing package or a broken model file
                    logger.error("%s: %s", self._failure, type(exc).__name__)
                    self._failed = True
            if self._failed:
                raise ProviderError(self._failure, code=self._code)
            return self._model
