"""The sentence the offline voice says in the speech tests, and how to compare what the
offline recogniser made of it.

tiny.en, the smallest Whisper model, sometimes writes "pairs" for Piper's "Paris": how
often depends on where the endpoint cut the audio and on the CPU's arithmetic (CI's
machine hears it more often than this one). The tests that are about turns, sockets and
browsers accept that one near-miss; word error rates are bench/wer.py's.
"""

from __future__ import annotations

import re

import numpy as np

SPOKEN = "What is the weather in Paris?"

# What tiny.en has been seen to write for a word of SPOKEN.
_NEAR_MISSES = {"pairs": "paris"}


def words(text: str) -> list[str]:
    """Lower-case words of ``text``, each near-miss written as the word that was said."""
    return [_NEAR_MISSES.get(word, word) for word in re.findall(r"[a-z']+", text.lower())]


SPOKEN_WORDS = words(SPOKEN)


SPEECH_FLOOR = 0.01  # -40 dBFS: quieter than this is a voice's own silence


def loud_span(samples: np.ndarray) -> slice:
    """From the first sample louder than the floor to the last (all of it if none is)."""
    loud = np.nonzero(np.abs(samples) > SPEECH_FLOOR)[0]
    return slice(loud[0], loud[-1] + 1) if loud.size else slice(0, len(samples))


def trimmed(samples: np.ndarray) -> np.ndarray:
    """Without the voice's own leading and trailing silence: pauses are exactly as said."""
    return samples[loud_span(samples)]
