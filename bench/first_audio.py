"""Time to first audio: our streaming pipeline against the seed's wait-for-everything design.

1. Scripted providers, the same for both designs: an LLM that takes 300 ms to its first
   token and then writes 40 tokens/s (three sentences), and a TTS that takes 150 ms to
   its first byte. "Streaming" is the real ``VoiceSession`` (first sentence to TTS while
   the LLM writes the rest); "wait for everything" collects the whole reply, then
   synthesises it, as the seed platform did. Measured: end of the user's turn (final
   transcript) -> first audio frame.
2. Offline voice to voice: Piper speech fed in real time (20 ms frames) into a session
   with the offline recogniser, the offline voice and an instant LLM. Measured: the
   user's last word -> first audio frame, and its stages.

Prints one JSON object. A measurement, not a test: there are no thresholds.

    .venv/bin/python bench/first_audio.py [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.protocol import Stamped
from engine.providers.audio import float_to_pcm16, pcm16_to_float, resample
from engine.providers.base import FinalTranscript, TextDelta
from engine.providers.stt.local.adapter import LocalSTT
from engine.providers.tts.local.adapter import LocalTTS
from engine.session import SessionConfig, TurnMetrics, VoiceSession
from tests.engine.providers.fake import Delay, FakeLLM, FakeSTT, FakeToolRunner, FakeTTS

SENTENCES = (
    "Your order left our warehouse in Lyon this morning at nine. ",
    "It should reach the Paris depot by tomorrow evening at the latest. ",
    "You will get a text message with a delivery window before it arrives.",
)
FIRST_TOKEN_S = 0.300
TOKENS_PER_S = 40
TTS_FIRST_BYTE_S = 0.150
QUESTION = "Where is my order?"


def reply_tokens() -> list[str]:
    return [word + " " for sentence in SENTENCES for word in sentence.split()]


def scripted_llm() -> FakeLLM:
    round_: list[Any] = [Delay(FIRST_TOKEN_S)]
    for token in reply_tokens():
        round_ += [token, Delay(1 / TOKENS_PER_S)]
    return FakeLLM(script=[round_])


def scripted_tts() -> FakeTTS:
    return FakeTTS(first_byte_delay=TTS_FIRST_BYTE_S, chunks=4)


def stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 1),
        "min": round(ordered[0], 1),
        "max": round(ordered[-1], 1),
    }


def session(*, llm: Any, stt: Any, tts: Any, metrics: list[TurnMetrics]) -> VoiceSession:
    """A voice session that appends each finished turn's metrics to ``metrics``."""

    async def emit(event: Stamped) -> None:
        return None

    async def send_audio(chunk: bytes) -> None:
        return None

    return VoiceSession(
        config=SessionConfig(
            session_id="bench", resume_token="-", workspace_id=1, llm_name="bench", mode="voice"
        ),
        llm=llm,
        tool_runner=FakeToolRunner(),
        emit=emit,
        send_audio=send_audio,
        stt=stt,
        tts=tts,
        on_turn_metrics=metrics.append,
    )


async def turns_done(metrics: list[TurnMetrics], count: int, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while len(metrics) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"turn {count} did not finish in {within} s")
        await asyncio.sleep(0.001)


# ---------------------------------------------------------------- 1. the two designs


async def streaming_first_audio_ms() -> float:
    metrics: list[TurnMetrics] = []
    stt = FakeSTT()
    voice = session(llm=scripted_llm(), stt=stt, tts=scripted_tts(), metrics=metrics)
    await voice.start()
    stt.streams[0].inject(FinalTranscript(QUESTION))
    await turns_done(metrics, 1)
    await voice.close()
    (turn,) = metrics
    assert turn.input_to_first_audio_ms is not None
    return turn.input_to_first_audio_ms


async def wait_for_everything_first_audio_ms() -> float:
    """The seed's design: the whole LLM reply first, then the whole reply to TTS."""
    llm, tts = scripted_llm(), scripted_tts()
    began = time.monotonic()
    messages = [{"role": "user", "content": QUESTION}]
    text = "".join(
        [e.text async for e in llm.stream(messages=messages, tools=[]) if isinstance(e, TextDelta)]
    )
    async for _chunk in tts.synthesize(text):
        return (time.monotonic() - began) * 1000
    raise AssertionError("no audio")


# ---------------------------------------------------------------- 2. offline voice to voice


async def spoken_question() -> bytes:
    pcm_24k = b"".join([c async for c in LocalTTS().synthesize("What is the weather in Paris?")])
    return float_to_pcm16(resample(pcm16_to_float(pcm_24k), 24_000, 16_000))


async def offline_voice_to_voice(turns: int) -> list[TurnMetrics]:
    question = await spoken_question()
    metrics: list[TurnMetrics] = []
    llm = FakeLLM(script=[["It is sunny in Paris today."]] * turns)
    voice = session(llm=llm, stt=LocalSTT(), tts=LocalTTS(), metrics=metrics)
    await voice.start()
    frame = 640  # 20 ms at 16 kHz
    audio = b"\0" * 9600 + question + b"\0" * 32_000  # 300 ms, the question, 1 s
    for turn in range(1, turns + 1):
        started = time.monotonic()
        for index, start in enumerate(range(0, len(audio), frame)):
            await voice.push_audio(audio[start : start + frame])
            # real time: frame n is due 20 ms * n after the first one
            await asyncio.sleep(max(0.0, started + (index + 1) * 0.02 - time.monotonic()))
        await turns_done(metrics, turn)
        await asyncio.sleep(2.5)  # the answer plays out before the next question
    await voice.close()
    return metrics


def offline_report(metrics: list[TurnMetrics]) -> dict[str, Any]:
    def column(name: str) -> dict[str, float]:
        values = [getattr(m, name) for m in metrics if getattr(m, name) is not None]
        return stats(values) if values else {}

    return {
        "turns": len(metrics),
        "last_word_to_first_audio_ms": column("first_audio_ms"),
        "end_of_utterance_ms": column("end_of_utterance_ms"),
        "stt_final_ms": column("stt_final_ms"),
        "tts_first_byte_ms": column("tts_first_byte_ms"),
    }


async def main(turns: int) -> dict[str, Any]:
    streaming = [await streaming_first_audio_ms() for _ in range(turns)]
    waiting = [await wait_for_everything_first_audio_ms() for _ in range(turns)]
    ratio = statistics.median(waiting) / statistics.median(streaming)
    offline = await offline_voice_to_voice(max(3, turns // 2))
    return {
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "scripted": {
            "llm": f"{FIRST_TOKEN_S * 1000:g} ms to first token, {TOKENS_PER_S} tokens/s, "
            f"{len(reply_tokens())} tokens in {len(SENTENCES)} sentences",
            "tts": f"{TTS_FIRST_BYTE_S * 1000:g} ms to first byte",
            "end_of_turn_to_first_audio_ms": {
                "streaming": stats(streaming),
                "wait_for_everything": stats(waiting),
                "ratio_p50": round(ratio, 2),
            },
        },
        "offline_voice_to_voice": offline_report(offline),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.turns)), indent=2))
