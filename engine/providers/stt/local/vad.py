"""Silero VAD for the offline recogniser, one stream at a time.

The model (``silero_vad_v6.onnx``) ships inside ``faster-whisper``; ONNX Runtime comes with
it. At 16 kHz it scores windows of 512 samples (32 ms), each preceded by the last 64
samples of the window before, and carries an LSTM state (``h``, ``c``: 1×1×128) from
window to window. One window costs about 0.1-0.2 ms of CPU, so it runs inline on the
event loop; the session (one ONNX Runtime thread) is shared by every stream, the state
is per stream.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from engine.providers import onnx

RATE = 16_000
WINDOW = 512  # samples: 32 ms
WINDOW_MS = WINDOW * 1000 // RATE
CONTEXT = 64

_lock = threading.Lock()
_session: Any = None


def _model() -> Any:
    global _session
    with _lock:
        if _session is None:
            from faster_whisper.utils import get_assets_path

            _session = onnx.session(os.path.join(get_assets_path(), "silero_vad_v6.onnx"))
        return _session


class SileroStream:
    """Speech probability of consecutive 32 ms windows of one audio stream."""

    def __init__(self) -> None:
        self._session = _model()
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._input = np.zeros((1, CONTEXT + WINDOW), dtype=np.float32)

    def probability(self, window: np.ndarray) -> float:
        """``window``: WINDOW float32 samples in [-1, 1], right after the previous one."""
        self._input[0, :CONTEXT] = self._input[0, WINDOW:]
        self._input[0, CONTEXT:] = window
        speech, self._h, self._c = self._session.run(
            None, {"input": self._input, "h": self._h, "c": self._c}
        )
        return float(np.asarray(speech).ravel()[0])
