"""Offline voice to voice: the user's last word -> the agent's first audio frame.

Each sentence is spoken by two offline voices, espeak-ng (``apt-get install espeak-ng``)
and Piper (``joe``), and fed in real time (20 ms frames, 0.3 s of silence before, 1.5 s
after) into a fresh ``VoiceSession`` with the offline recogniser, an instant scripted LLM
and Piper answering. Two end-of-turn rules run on the same recordings in the same run:

- ``fixed``: the turn ends after a fixed 600 ms of silence, and only then does Whisper
  decode it (the rule before smart-turn: ``turn_model=False``, the final decoded at 600 ms);
- ``smart``: the defaults: the final decode starts at the first 160 ms pause while the
  smart-turn model judges whether the user has finished (the turn ends when it is sure and
  the decoded words end a sentence; both are asked again at 480 ms, then 1 s ends it).

The last word is the recording's own (the frame holding its last sample louder than
-40 dBFS was pushed), not the voice-activity detector's guess. Per stage (p50/p90): end
of utterance (the detector's last voiced window -> end of turn decided), final transcript
(end of turn -> text), TTS first byte, and first audio. Word error rate over the same
sentences, normalised as in ``bench/wer.py``.

False cuts: each sentence of ``PAUSED`` is spoken whole, then cut at the quietest moment
near the end of its first part, the quiet there taken out and exactly 400 ms of silence
put in (the voice's prosody says "more to come", as a user's does who pauses
mid-sentence); a recording that makes more than one turn was cut.

The thresholds and rules (``Endpointing``) were tuned on ``TUNED_ON`` (which holds the
sentences of earlier versions of this benchmark too), never on these sentences.
Prints one JSON object, then a short table. A measurement, not a test.

    .venv/bin/python bench/voice_to_voice.py [--voices espeak-ng,piper] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.wer import edit_distance, espeak, normalise, piper
from engine.protocol import Stamped, TurnEvent
from engine.providers.audio import float_to_pcm16
from engine.providers.stt.local.adapter import Endpointing, LocalSTT
from engine.providers.tts.local.adapter import LocalTTS
from engine.session import SessionConfig, TurnMetrics, VoiceSession
from tests.engine.providers.fake import FakeLLM, FakeToolRunner

RATE = 16_000
FRAME = 640  # 20 ms
SPEECH_FLOOR = 0.01  # -40 dBFS
REPLY = "All right, I will take care of that for you now."

SENTENCES = (
    "Which platform does the train to Amsterdam leave from?",
    "Please transfer fifty euros to my brother's account.",
    "Can you read me the last message from my landlord?",
    "What time does the bakery on the corner open on Sunday?",
    "I lost my credit card and need to block it right now.",
    "Book a haircut for next Tuesday at ten in the morning.",
    "How much rain is expected in Dublin this weekend?",
    "Tell the kids that dinner will be ready in twenty minutes.",
    "Is there a vegetarian option on the lunch menu today?",
    "Switch the living room heating to twenty one degrees.",
)
PAUSED = (
    ("I need to pick up", "my prescription from the pharmacy."),
    ("Could you find me", "a cheap hotel near the stadium?"),
    ("Send an email to", "the team about tomorrow's meeting."),
    ("What is the fastest way", "to get to the airport from here?"),
    ("Please cancel", "my gym membership at the end of the month."),
    ("How many calories are", "in a bowl of oatmeal with honey?"),
    ("Remind my wife that", "the plumber is coming on Thursday."),
    ("Turn off all the lights", "except the one in the hallway."),
)
PAUSE_MS = 400
# Tuning (thresholds, the punctuation rule) looked at these, never at the ones above.
TUNED_ON = (
    "What is the weather in Paris today?",
    "Please book a table for four people at eight tonight.",
    "I would like to order a coffee.",
    "Thank you very much.",
    "Turn on the kitchen lights.",
    "I need a taxi to the airport at seven.",
    "Where is the closest pharmacy around here?",
    "Remind me to water the plants tonight.",
    "Play some jazz music please.",
    "How far is the moon from the earth?",
    "Could you tell me when the next train to Brussels leaves?",
    "I want to cancel my subscription before the end of the month.",
    "Send a message to Anna saying I will be ten minutes late.",
    "What is the balance of my savings account?",
    "Please move my dentist appointment to Friday afternoon.",
    "Is the museum open on public holidays?",
    "Order two large pizzas with extra cheese for delivery.",
    "How many steps did I walk yesterday?",
    "I would like to book a room for two nights in Berlin.",
    "Can you check whether my parcel has been delivered?",
    "Set an alarm for six thirty tomorrow morning.",
    "My flight number is Lufthansa four five one.",
    "Please add milk and bread to the shopping list.",
    "What did my manager write in the last email?",
)
MODES = {
    "fixed": Endpointing(turn_model=False, check_silence_ms=600, end_silence_ms=600),
    "smart": Endpointing(),
}

_BENCH = {*SENTENCES, *(f"{a} {b}" for a, b in PAUSED)}
assert not _BENCH & set(TUNED_ON), "bench sentences must not be the tuning ones"


# ---------------------------------------------------------------- speech


async def speak(voice: str, text: str, folder: Path) -> np.ndarray:
    return espeak(text, folder) if voice == "espeak-ng" else await piper(text)


def last_word_frame(pcm: bytes) -> int:
    samples = np.abs(np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768)
    loud = np.nonzero(samples > SPEECH_FLOOR)[0]
    return int(loud[-1]) * 2 // FRAME if loud.size else 0


def trimmed(samples: np.ndarray) -> np.ndarray:
    """Without the voice's own leading and trailing silence: pauses are exactly as said."""
    loud = np.nonzero(np.abs(samples) > SPEECH_FLOOR)[0]
    return samples[loud[0] : loud[-1] + 1] if loud.size else samples


def split(samples: np.ndarray, near: int) -> tuple[np.ndarray, np.ndarray]:
    """Cut at the quietest 20 ms within 250 ms of ``near`` (a gap between two words), and
    take out the quiet already there: the pause put in is then the whole pause."""
    step, reach = RATE // 50, RATE // 4
    starts = range(max(step, near - reach), min(len(samples) - step, near + reach), step // 4)
    cut = min(starts, key=lambda at: float(np.abs(samples[at : at + step]).mean())) + step // 2
    quiet = np.abs(samples) <= SPEECH_FLOOR
    begin, end = cut, cut
    while begin > 0 and quiet[begin - 1]:
        begin -= 1
    while end < len(samples) and quiet[end]:
        end += 1
    return samples[:begin], samples[end:]


def recording(*parts: np.ndarray) -> bytes:
    pieces = [np.zeros(int(RATE * 0.3), np.float32)]
    for index, part in enumerate(parts if len(parts) > 1 else map(trimmed, parts)):
        if index:
            pieces.append(np.zeros(RATE * PAUSE_MS // 1000, np.float32))
        pieces.append(part.astype(np.float32))
    pieces.append(np.zeros(int(RATE * 1.5), np.float32))
    return float_to_pcm16(np.concatenate(pieces))


# ---------------------------------------------------------------- one session


async def converse(pcm: bytes, rules: Endpointing) -> dict[str, Any]:
    """Feed ``pcm`` in real time to a new session; its turns, finals and first audio."""
    metrics: list[TurnMetrics] = []
    finals: list[str] = []

    async def emit(event: Stamped) -> None:
        if isinstance(event.event, TurnEvent):
            finals.append(event.event.text)

    async def send_audio(chunk: bytes) -> None:
        return None

    session = VoiceSession(
        config=SessionConfig(
            session_id="bench", resume_token="-", workspace_id=1, llm_name="bench"
        ),
        llm=FakeLLM(script=[[REPLY]] * 4),
        tool_runner=FakeToolRunner(),
        emit=emit,
        send_audio=send_audio,
        stt=LocalSTT(endpointing=rules),
        tts=LocalTTS(),
        on_turn_metrics=metrics.append,
    )
    await session.start()
    last_frame, pushed_last_word_at = last_word_frame(pcm), None
    began = time.monotonic()
    for index, start in enumerate(range(0, len(pcm), FRAME)):
        await session.push_audio(pcm[start : start + FRAME])
        if index == last_frame:
            pushed_last_word_at = time.monotonic()
        await asyncio.sleep(max(0.0, began + (index + 1) * 0.02 - time.monotonic()))
    for _ in range(1000):  # up to 10 s for the turn's figures
        if metrics:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # a second turn that was cut off arrives too
    await session.close()
    return {"metrics": metrics, "finals": finals, "last_word_at": pushed_last_word_at}


def turn_figures(result: dict[str, Any]) -> dict[str, float | None]:
    turns: list[TurnMetrics] = result["metrics"]
    if not turns:
        return {}
    last = turns[-1]  # the turn that holds the last word
    first_audio = last.first_audio_at
    return {
        "voice_to_voice_ms": None
        if first_audio is None or result["last_word_at"] is None
        else (first_audio - result["last_word_at"]) * 1000,
        "end_of_utterance_ms": last.end_of_utterance_ms,
        "stt_final_ms": last.stt_final_ms,
        "tts_first_byte_ms": last.tts_first_byte_ms,
    }


# ---------------------------------------------------------------- the run


def quantiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)

    def rank(q: float) -> float:
        return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 1)

    return {"p50": rank(0.5), "p90": rank(0.9), "max": rank(1.0), "n": len(ordered)}


async def measure(mode: str, recordings: dict[str, Any]) -> dict[str, Any]:
    rules = MODES[mode]
    rows, cuts, words, errors = [], [], 0, 0
    for (voice, sentence), pcm in recordings["whole"].items():
        result = await converse(pcm, rules)
        heard = " ".join(result["finals"])
        reference = normalise(sentence)
        words += len(reference)
        errors += edit_distance(reference, normalise(heard))
        rows.append({"voice": voice, "sentence": sentence, "heard": heard,
                     **turn_figures(result)})  # fmt: skip
    for (voice, sentence), pcm in recordings["paused"].items():
        result = await converse(pcm, rules)
        cuts.append({"voice": voice, "sentence": sentence, "turns": len(result["finals"]),
                     "heard": result["finals"]})  # fmt: skip

    def column(name: str) -> dict[str, float] | None:
        return quantiles([row[name] for row in rows if row.get(name) is not None])

    return {
        "voice_to_voice_ms": column("voice_to_voice_ms"),
        "end_of_utterance_ms": column("end_of_utterance_ms"),
        "stt_final_ms": column("stt_final_ms"),
        "tts_first_byte_ms": column("tts_first_byte_ms"),
        "wer_pct": round(100 * errors / max(1, words), 1),
        "false_cuts": sum(1 for cut in cuts if cut["turns"] > 1),
        "paused_recordings": len(cuts),
        "rows": rows,
        "paused": cuts,
    }


async def record(voices: list[str], count: int) -> dict[str, Any]:
    whole, paused = {}, {}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for voice in voices:
            for sentence in SENTENCES[:count]:
                whole[voice, sentence] = recording(await speak(voice, sentence, folder))
            for first, second in PAUSED[:count]:
                whole_sentence = trimmed(await speak(voice, f"{first} {second}", folder))
                near = len(trimmed(await speak(voice, first, folder)))
                paused[voice, f"{first} … {second}"] = recording(*split(whole_sentence, near))
    return {"whole": whole, "paused": paused}


async def main(voices: list[str], count: int) -> dict[str, Any]:
    recordings = await record(voices, count)
    await converse(recordings["whole"][next(iter(recordings["whole"]))], MODES["smart"])  # warm
    results = {mode: await measure(mode, recordings) for mode in MODES}
    fixed, smart = (results[m]["voice_to_voice_ms"] or {} for m in ("fixed", "smart"))
    return {
        "benchmark": "voice_to_voice",
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, "
        f"python {platform.python_version()}",
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "voices": voices,
        "reply": REPLY,
        "ratio_p50_smart_to_fixed": round(smart["p50"] / fixed["p50"], 2)
        if smart and fixed
        else None,
        "modes": results,
    }


def table(result: dict[str, Any]) -> str:
    lines = ["mode    v2v p50/p90 ms   end-of-utt p50   stt final p50   tts 1st byte p50"
             "   WER %   false cuts"]  # fmt: skip
    for mode, figures in result["modes"].items():

        def p(name: str, key: str = "p50", figures: dict[str, Any] = figures) -> str:
            return f"{(figures[name] or {}).get(key, float('nan')):.0f}"

        lines.append(
            f"{mode:<8}{p('voice_to_voice_ms')}/{p('voice_to_voice_ms', 'p90'):<12}"
            f"{p('end_of_utterance_ms'):>10}{p('stt_final_ms'):>16}{p('tts_first_byte_ms'):>18}"
            f"{figures['wer_pct']:>10}{figures['false_cuts']:>7}/{figures['paused_recordings']}"
        )
    lines.append(f"smart/fixed voice-to-voice p50: {result['ratio_p50_smart_to_fixed']}; "
                 f"load average {result['load_average']}")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--voices", default="espeak-ng,piper")
    parser.add_argument("--quick", action="store_true", help="3 sentences of each kind")
    args = parser.parse_args()
    chosen = [v.strip() for v in args.voices.split(",") if v.strip()]
    if "espeak-ng" in chosen and shutil.which("espeak-ng") is None:
        sys.exit("espeak-ng is needed (apt-get install espeak-ng), or --voices piper")
    outcome = asyncio.run(main(chosen, 3 if args.quick else len(SENTENCES)))
    print(json.dumps(outcome, indent=1))
    print()
    print(table(outcome))
