"""What the offline speech engines share: PCM16 conversion, resampling, and a model
loaded once per process.

Resampling uses soxr (the SoX resampler), never a hand-written interpolation.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

import numpy as np
import soxr

from engine.protocol import ErrorCode
from engine.providers.base import ProviderError

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


def not_installed(*modules: str) -> bool:
    """Whether any of ``modules`` is missing from this environment (looked up, not imported:
    asking costs nothing, whatever the model weighs)."""
    return any(importlib.util.find_spec(module) is None for module in modules)


# One loader at a time in a process: two models imported on two threads at once (both
# import faster_whisper) could raise ``_DeadlockError`` on Python's import locks.
_LOADING = threading.Lock()
_MODELS: list[OfflineModel] = []


class OfflineModel:
    """A model loaded once per process, on first use (or ahead of it on ``executor``).

    Loads are serialised process-wide (``_LOADING``) and verified: ``verify`` runs the
    model once on a tiny input, so a model that loads but cannot run counts as failed. A
    failure is logged and refused at once (``ProviderError`` saying what to install) for
    ``retry_after_s``; after that the next use or ``preload`` loads it again. ``status``
    is what ``/healthz`` and the session setup read.
    """

    def __init__(
        self,
        load: Callable[[], Any],
        *,
        executor: Executor,
        failure: str,
        code: ErrorCode,
        name: str = "model",
        verify: Callable[[Any], object] | None = None,
        retry_after_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load, self._verify, self._executor = load, verify, executor
        self.name, self._failure, self._code = name, failure, code
        self._retry_after_s, self._clock = retry_after_s, clock
        self._lock = threading.Lock()
        self._model: Any = None
        self._failed_at: float | None = None
        self._wanted = False  # asked for (preload or use): its status counts
        self._pending: Future[Any] | None = None
        _MODELS.append(self)

    @property
    def status(self) -> str:
        """``ok``, ``failed`` (until a retry loads it), ``loading`` or ``idle`` (never asked)."""
        if self._model is not None:
            return "ok"
        if self._failed_at is not None:
            return "failed"
        return "loading" if self._wanted else "idle"

    @property
    def failure(self) -> str:
        return self._failure

    def _retry_due(self) -> bool:
        return self._failed_at is None or self._clock() - self._failed_at >= self._retry_after_s

    def preload(self) -> Future[Any] | None:
        """Start loading on the executor's thread, so the first session waits less."""
        pending = self._pending
        if self._model is not None or not self._retry_due():
            return None
        if pending is not None and not pending.done():
            return pending
        self._wanted = True
        self._pending = self._executor.submit(self._get_quietly)
        return self._pending

    def _get_quietly(self) -> Any:
        with contextlib.suppress(ProviderError):  # logged and kept in ``status``
            return self.get()
        return None

    def get(self) -> Any:
        if self._model is not None:
            return self._model
        with self._lock:
            self._wanted = True
            if self._model is None and self._retry_due():
                self._model = self._load_verified()
            if self._model is None:
                raise ProviderError(self._failure, code=self._code)
            return self._model

    async def ready(self) -> Any:
        """The model, loading it off the event loop if needed (``ProviderError`` if it fails)."""
        if self._model is not None:
            return self._model
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.get)

    def _load_verified(self) -> Any:
        try:
            with _LOADING:
                model = self._load()
                if self._verify is not None:
                    self._verify(model)
        except Exception as exc:  # a missing package, a broken file, a model that cannot run
            self._failed_at = self._clock()
            logger.error(
                "%s (%s); retried in %g s", self._failure, type(exc).__name__, self._retry_after_s
            )
            return None
        self._failed_at = None
        logger.info("offline model loaded: %s", self.name)
        return model


def offline_models_status() -> dict[str, str]:
    """Each offline model this process was asked for, by name: its ``status``. A failed one
    whose retry is due is loaded again in the background (so a failure is not forever)."""
    for model in _MODELS:
        if model.status == "failed":
            model.preload()
    return {model.name: model.status for model in _MODELS if model.status != "idle"}


def offline_models_failures(*models: OfflineModel) -> list[str]:
    """What each of ``models`` that failed to load says to install (empty: none failed)."""
    return [model.failure for model in models if model.status == "failed"]
