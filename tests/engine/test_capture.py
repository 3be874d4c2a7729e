"""The two-channel capture at the door seam: one timeline, silence in the gaps, a barge-in
cut, the length cap, and a WAV streamed from the spool."""

from __future__ import annotations

import io
import wave
from pathlib import Path

import numpy as np

from engine.doors.capture import RATE, AudioCapture


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _samples(ms: int, value: int) -> bytes:
    return np.full(RATE * ms // 1000, value, dtype="<i2").tobytes()


def _channels(capture: AudioCapture) -> tuple[np.ndarray, np.ndarray]:
    with wave.open(io.BytesIO(b"".join(capture.wav_chunks()))) as wav:
        assert (wav.getnchannels(), wav.getframerate(), wav.getsampwidth()) == (2, RATE, 2)
        frames = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").reshape(-1, 2)
    return frames[:, 0], frames[:, 1]


def _capture(tmp_path: Path, clock: Clock, max_seconds: float = 60) -> AudioCapture:
    return AudioCapture(spool_dir=str(tmp_path), max_seconds=max_seconds, clock=clock)


def test_both_sides_share_one_timeline_with_silence_where_nobody_spoke(tmp_path: Path) -> None:
    clock = Clock()
    capture = _capture(tmp_path, clock)
    capture.caller(_samples(100, 1000))  # at 0 s
    clock.now += 2.0
    capture.caller(_samples(100, 1000))  # after a 1.9 s pause: at 2 s
    capture.agent(_samples(500, 700), rate=RATE)  # the reply starts at 2 s
    capture.agent(_samples(500, 700), rate=RATE)  # sent at once, played after the first
    caller, agent = _channels(capture)

    assert len(caller) == len(agent) == RATE * 3  # the reply ends at 3 s
    assert (caller[: RATE // 10] == 1000).all() and (caller[RATE // 10 : RATE * 2] == 0).all()
    assert (caller[RATE * 2 : RATE * 2 + RATE // 10] == 1000).all()
    assert (agent[: RATE * 2] == 0).all() and (agent[RATE * 2 :] == 700).all()
    assert capture.duration_ms == 3000 and capture.wav_size() == 44 + RATE * 3 * 4
    capture.close()
    assert list(tmp_path.iterdir()) == []  # the spool is gone


def test_jitter_shorter_than_the_gap_inserts_no_silence_into_speech(tmp_path: Path) -> None:
    clock = Clock()
    capture = _capture(tmp_path, clock)
    arrivals = [0.02 * n for n in range(5)] + [0.3] * 10 + [0.3 + 0.02 * n for n in range(5)]
    for arrival in arrivals:  # ten frames held up 200 ms, then arriving at once
        clock.now = 100.0 + arrival
        capture.caller(_samples(20, 500))
    caller, _ = _channels(capture)
    assert (caller == 500).all() and len(caller) == RATE * 400 // 1000


def test_a_barge_in_drops_what_was_sent_but_not_yet_played(tmp_path: Path) -> None:
    clock = Clock()
    capture = _capture(tmp_path, clock)
    capture.agent(_samples(3000, 700), rate=RATE)  # three seconds, sent at once
    clock.now += 1.0
    capture.cut()  # the caller spoke after one second
    capture.agent(_samples(500, 300), rate=RATE)  # the next reply follows at once
    _, agent = _channels(capture)
    assert len(agent) == RATE * 3 // 2
    assert (agent[:RATE] == 700).all() and (agent[RATE:] == 300).all()


def test_the_agent_at_24_khz_is_resampled_to_the_recording_rate(tmp_path: Path) -> None:
    capture = _capture(tmp_path, Clock())
    capture.agent(np.full(24_000, 1000, dtype="<i2").tobytes(), rate=24_000)
    capture.finish()  # what the resampler held
    _, agent = _channels(capture)
    assert abs(len(agent) - RATE) < RATE // 50
    assert abs(int(np.count_nonzero(np.abs(agent) > 500)) - RATE) < RATE // 50


def test_a_recording_stops_at_its_longest(tmp_path: Path) -> None:
    clock = Clock()
    capture = _capture(tmp_path, clock, max_seconds=1)
    capture.caller(_samples(800, 100))
    capture.caller(_samples(800, 100))
    clock.now += 5
    capture.agent(_samples(500, 100), rate=RATE)
    caller, agent = _channels(capture)
    assert len(caller) == RATE and capture.truncated
    assert (agent == 0).all()  # it came after the end
