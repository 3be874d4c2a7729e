"""Several people speaking at once to one process's offline recogniser: each gets partial
transcripts while speaking and a final of their own words; and the speech models' threads
stay inside the process's CPU set."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from engine.providers.audio import float_to_pcm16, pcm16_to_float, resample
from engine.providers.base import FinalTranscript, PartialTranscript, STTEvent
from engine.providers.stt.local.adapter import LocalSTT
from engine.providers.tts.local.adapter import LocalTTS
from tests.speech import words

FRAME = 640  # 20 ms at 16 kHz
SAID = (
    "Please transfer fifty euros to my brother's account.",
    "What time does the bakery on the corner open on Sunday?",
    "I lost my credit card and need to block it right now.",
    "Is there a vegetarian option on the lunch menu today?",
)


@pytest.fixture(scope="module")
def recordings() -> list[bytes]:
    """Each sentence spoken by the offline voice, at 16 kHz, as a browser would send it."""

    async def speak(text: str) -> bytes:
        pcm_24k = b"".join([chunk async for chunk in LocalTTS().synthesize(text)])
        return float_to_pcm16(resample(pcm16_to_float(pcm_24k), 24_000, 16_000))

    async def speak_all() -> list[bytes]:
        return [await speak(text) for text in SAID]

    return asyncio.run(speak_all())


async def talk(audio: bytes) -> list[STTEvent]:
    """``audio`` in 20 ms frames in real time, then silence until the final (or 30 s)."""
    # A fixed silence ends the turn: this is about the words and the partials, not the end.
    stream = await LocalSTT(end_silence_ms=600, turn_model=False).open(sample_rate=16_000)
    events: list[STTEvent] = []
    spoken = b"\0" * 9600 + audio + b"\0" * 64_000  # 0.3 s before, 2 s after

    async def feed() -> None:
        loop = asyncio.get_running_loop()
        began = loop.time()
        for index, start in enumerate(range(0, len(spoken), FRAME)):
            await stream.push_audio(spoken[start : start + FRAME])
            await asyncio.sleep(max(0.0, began + (index + 1) * 0.02 - loop.time()))

    async def collect() -> None:
        async for event in stream.events():
            events.append(event)
            if isinstance(event, FinalTranscript):
                return

    feeding = asyncio.create_task(feed())
    try:
        await asyncio.wait_for(collect(), 30)
    finally:
        feeding.cancel()
        await stream.aclose()
    return events


async def test_four_people_speaking_at_once_each_see_partials_and_get_their_own_words(
    recordings: list[bytes],
) -> None:
    heard = await asyncio.gather(*(talk(audio) for audio in recordings))
    for own, (said, events) in enumerate(zip(SAID, heard, strict=True)):
        finals = [e for e in events if isinstance(e, FinalTranscript)]
        partials = [e for e in events if isinstance(e, PartialTranscript)]
        assert len(finals) == 1
        # Their own words: most of their sentence, and more of it than of anyone else's
        # (tiny.en mishears a word now and then under load: "fifty euros" -> "50 year").
        got = set(words(finals[0].text))
        shared = [len(got & set(words(other))) / len(set(words(other))) for other in SAID]
        assert shared[own] >= 0.7, (said, finals[0].text)
        assert max(shared) == shared[own] and sorted(shared)[-2] < 0.5, (said, finals[0].text)
        assert partials, f"no partial transcript while saying {said!r}"
        assert events.index(partials[0]) < events.index(finals[0])


_PINNED = """
import asyncio, json, os
import numpy as np
from engine.providers.stt.local import adapter, turn, vad
from engine.providers.tts.local.adapter import LocalTTS

async def main():
    adapter.preload_models()
    await adapter._WHISPER.ready()
    await turn.ready()
    adapter.transcribe(np.zeros(16_000, dtype=np.float32))
    turn.probability_complete(np.zeros(16_000, dtype=np.float32))
    vad.SileroStream().probability(np.zeros(vad.WINDOW, dtype=np.float32))
    [chunk async for chunk in LocalTTS().synthesize("Hello there.")]

asyncio.run(main())
allowed = {}
for tid in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{tid}/status") as status:
        for line in status:
            if line.startswith("Cpus_allowed_list:"):
                allowed[tid] = line.split()[1]
print(json.dumps(allowed))
"""


def threads_on(cpus: set[int]) -> dict[str, str]:
    """Each thread of a fresh process on ``cpus`` that ran every offline model once, and
    the CPUs it may run on."""
    run = subprocess.run(
        ["taskset", "-c", ",".join(map(str, sorted(cpus))), sys.executable, "-c", _PINNED],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    allowed: dict[str, str] = json.loads(run.stdout.strip().splitlines()[-1])
    return allowed


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to compare")
def test_a_process_on_one_cpu_runs_its_speech_models_on_that_cpu_with_fewer_threads() -> None:
    one, two = sorted(os.sched_getaffinity(0))[:2]
    on_one, on_two = threads_on({one}), threads_on({one, two})
    assert set(on_one.values()) == {str(one)}  # none escapes the CPU set
    # Whisper's two workers and Piper give up their second thread: on one CPU it would
    # only wait its turn.
    assert len(on_one) <= len(on_two) - 3
