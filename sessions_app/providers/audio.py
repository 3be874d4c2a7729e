"""PCM16 helpers shared by the offline speech engines: conversion and resampling.

Resampling uses soxr (the SoX resampler), never a hand-written interpolation.
"""

from __future__ import annotations

import numpy as np
import soxr

PCM16_MAX = 32767


def pcm16_to_float(pcm16: bytes) -> np.ndarray:
    """PCM16 little-endian bytes → float32 samples in [-1, 1]."""
    usable = len(pcm16) - len(pcm16) % 2
    samples = np.frombuffer(pcm16[:usable], dtype="<i2")
    return samples.astype(np.float32) / 32768.0


def float_to_pcm16(samples: np.ndarray) -> bytes:
    """float samples in [-1, 1] → PCM16 little-endian bytes (clipped)."""
    clipped = np.clip(samples, -1.0, 1.0) * PCM16_MAX
    return np.rint(clipped).astype("<i2").tobytes()


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """One whole buffer of float32 mono samples at another rate."""
    if from_rate == to_rate or samples.size == 0:
        return samples.astype(np.float32, copy=False)
    return soxr.resample(samples.astype(np.float32, copy=False), from_rate, to_rate)


def duration_ms(pcm16: bytes, sample_rate: int) -> float:
    return len(pcm16) * 1000 / (2 * sample_rate)
