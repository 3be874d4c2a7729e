"""Offline voice to voice: the user's last word -> the agent's first audio frame.

Each utterance is spoken by two offline voices, espeak-ng (``apt-get install espeak-ng``)
and Piper (``joe``), each at a rate between 140 and 180 words a minute (espeak-ng's ``-s``;
Piper's ``length_scale``, chosen so that the utterance lasts as long as that rate says),
and fed in real time (0.3 s of silence before, up to 1.5 s after) in 20 ms and in 40 ms
frames into a fresh ``VoiceSession`` with the offline recogniser, an instant scripted LLM
and Piper answering. The end-of-turn rules run on the same recordings in the same run:

- ``fixed``: the turn ends after a fixed 600 ms of silence, and only then does Whisper
  decode it (the rule before smart-turn: ``turn_model=False``, the final decoded at 600 ms);
- ``smart``: the rule before the graded one (the first 160 ms pause starts the final decode
  and the smart-turn model; the turn ends when the model is sure, p >= 0.8, AND the decoded
  words end a sentence; both are asked again at 480 ms, either is enough; then 1 s);
- ``graded``: the defaults (``Endpointing``; docs/speech.md, "End of turn, offline");
- ``graded-wait``: the same, without preemptive generation (the reply starts at the final,
  not ahead at the recogniser's likely end of turn: docs/speech.md), as before it existed.

Every mode but ``graded-wait`` has the session's default, preemptive generation on.
``--llm-delay-ms``: the scripted LLM takes this long to its first token (a cloud model's
time; 0: instant). Per mode: final transcript -> first audio, how many replies were started
ahead and released, and LLM requests per answered turn (above 1: replies started ahead and
discarded, the user having gone on after a pause).

The last word is the recording's own (the frame holding its last sample louder than
-40 dBFS was pushed), not the voice-activity detector's guess. Per stage (p50/p90): the
detector's release (last word -> its last voiced window), end of utterance (-> end of turn
decided), final transcript (-> text), TTS first byte, and first audio. Word error rate
over the same utterances, normalised as in ``bench/wer.py``. Figures per kind of utterance
(``HELD_OUT``: statements, questions, commands, numbers, names), per voice and per frame
size.

``--replay``: the decision alone, in the recording's own time, as if the models took no
time (each frame goes in once every decode and verdict it started is done; no partial
transcripts): where the turn ended after the last word, in ms of audio, and the most false
cuts the rule can make. On a shared, loaded machine real time measures the load; this
does not.

False cuts: each sentence of ``PAUSED`` is spoken whole, then cut at the quietest moment
near the end of its first part, the quiet there taken out and exactly 400 ms of silence
put in (the voice's prosody says "more to come", as a user's does who pauses
mid-sentence); a recording that makes more than one turn was cut.

The rules were tuned on ``TUNING`` and ``PAUSED_TUNING`` (``--set tuning``) and earlier
versions on ``EARLIER``; ``TUNED_ON`` is all of those, and no held-out utterance is in it.
Prints one JSON object (the load average before and after the run, and at each
conversation), then tables.
A measurement, not a test.

    .venv/bin/python bench/voice_to_voice.py [--set heldout|tuning] [--kinds names,numbers]
        [--voices espeak-ng,piper] [--frames 20,40] [--modes fixed,smart,graded] [--quick]
        [--replay] [--llm-delay-ms 300] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import wave
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.wer import edit_distance, normalise
from engine.protocol import Stamped, TurnEvent
from engine.providers.audio import float_to_pcm16, pcm16_to_float, resample
from engine.providers.base import FinalTranscript
from engine.providers.stt.local.adapter import Check, Endpointing, LocalSTT
from engine.providers.tts.local import adapter as tts_local
from engine.providers.tts.local.adapter import LocalTTS
from engine.session import SessionConfig, TurnMetrics, VoiceSession
from tests.engine.providers.fake import Delay, FakeLLM, FakeToolRunner
from tests.speech import SPEECH_FLOOR, trimmed

RATE = 16_000
REPLY = "All right, I will take care of that for you now."
FRAME = 640  # 20 ms: what bench/speech_capacity.py sends
RATES_WPM = (140, 150, 160, 170, 180)  # an utterance's rate: the next of these, by index
KINDS = ("statements", "questions", "commands", "numbers", "names")

# Never used for tuning. The first ten are the sentences of earlier versions of this bench.
HELD_OUT: dict[str, tuple[str, ...]] = {
    "statements": (
        "I lost my credit card and need to block it right now.",
        "My daughter starts school next week.",
        "The heating in the bedroom is not working.",
        "I already paid that bill yesterday.",
        "That sounds good to me.",
        "We are running about fifteen minutes late.",
        "The package arrived but the box was damaged.",
        "I think I left my umbrella on the bus.",
        "No, I meant the other appointment.",
    ),
    "questions": (
        "Which platform does the train to Amsterdam leave from?",
        "Can you read me the last message from my landlord?",
        "What time does the bakery on the corner open on Sunday?",
        "How much rain is expected in Dublin this weekend?",
        "Is there a vegetarian option on the lunch menu today?",
        "Do you deliver on weekends?",
        "Why was my card declined?",
        "Who is on call tonight?",
        "Where did I park the car?",
    ),
    "commands": (
        "Please transfer fifty euros to my brother's account.",
        "Book a haircut for next Tuesday at ten in the morning.",
        "Tell the kids that dinner will be ready in twenty minutes.",
        "Switch the living room heating to twenty one degrees.",
        "Stop the music.",
        "Open the garage door.",
        "Read my calendar for tomorrow.",
        "Cancel my last order.",
        "Lock the front door and turn off the porch light.",
    ),
    "numbers": (
        "My PIN is four seven one nine.",
        "The order number is eight three two five six.",
        "Call me back on zero seven seven zero nine one two three four five.",
        "I need twelve tickets for the fourteenth of March.",
        "My postcode is two zero one nine.",
        "The total came to forty six dollars and twenty cents.",
        "Room three hundred and eleven, please.",
        "My date of birth is the second of June nineteen eighty four.",
        "It is flight two two seven to Lisbon.",
    ),
    "names": (
        "Call Siobhan Okonkwo.",
        "Send a text to Priya Raghunathan.",
        "My name is Bartholomew Kowalczyk.",
        "Is Doctor Nakamura available on Monday?",
        "Put me through to Ingrid Halvorsen.",
        "Email the invoice to Mateo Fernandez.",
        "I am calling for Aoife Brennan.",
        "Book a table under the name Giuseppe Moretti.",
        "Remind Kwame Mensah about the meeting.",
    ),
}
# The sentences of earlier versions of this bench, still held out (bench/speech_capacity.py
# and bench/phone.py speak them).
_Q, _C = HELD_OUT["questions"], HELD_OUT["commands"]
SENTENCES = (
    _Q[0],
    _C[0],
    _Q[1],
    _Q[2],
    HELD_OUT["statements"][0],
    _C[1],
    _Q[3],
    _C[2],
    _Q[4],
    _C[3],
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
    ("The reference number is", "nine one four two six."),
    ("Can you put me through to", "Maria Lindqvist please?"),
    ("I would like to book", "a table for two at seven."),
    ("Tell my boss that", "I will be late today."),
    ("Is it going to", "rain in London tomorrow?"),
    ("Set a timer for", "twenty five minutes."),
    ("My new address is", "fourteen Baker Street."),
    ("Play the album", "by Miriam Makeba."),
)
PAUSE_MS = 400

# What tuning looked at (``--set tuning``), never the utterances above.
TUNING: dict[str, tuple[str, ...]] = {
    "statements": (
        "I forgot my password again.",
        "The train was cancelled this morning.",
        "My phone battery is almost empty.",
        "I would like to speak to someone about my bill.",
        "That is all for today.",
        "We moved to a new address last month.",
    ),
    "questions": (
        "Are you open on Christmas Eve?",
        "How long does shipping take?",
        "What is my current balance?",
        "Can I change my seat?",
        "When does the pool close?",
        "Did my refund go through?",
    ),
    "commands": (
        "Pause the podcast.",
        "Close the blinds in the bedroom.",
        "Call a taxi for six people.",
        "Turn the volume down a little.",
        "Show me my recent orders.",
        "Skip this song.",
    ),
    "numbers": (
        "My account number is five five eight one two.",
        "The code is nine zero four.",
        "I need a table for seven at half past eight.",
        "My phone number is zero six one two three four five six seven eight.",
        "It costs ninety nine euros.",
        "Gate number forty two.",
        "Extension four four two one.",
        "My card ends in three three eight zero.",
        "The flight leaves at six forty five.",
        "I was born in nineteen ninety two.",
        "The confirmation code is seven one one five two.",
        "Put me down for eighteen people.",
    ),
    "names": (
        "Call Margaret Thompson.",
        "Message Oluwaseun Adeyemi.",
        "My name is Henrik Johansson.",
        "Is Professor Yamamoto in today?",
        "Transfer me to Fatima Al Sayed.",
        "Invite Dmitri Volkov to the call.",
        "Ask Benedikt Schreiber to call me.",
        "Connect me with Anneliese Dufour.",
        "Is Nkechi Obi working today?",
        "Forward this to Rajesh Venkataraman.",
        "Add Colm Sullivan to the list.",
        "I have an appointment with Doctor Szymanski.",
    ),
}
PAUSED_TUNING = (
    ("I want to pay", "my electricity bill."),
    ("Where can I find", "the nearest cash machine?"),
    ("Please remind me to", "call the bank tomorrow."),
    ("My account number is", "six two zero eight."),
    ("Can you send a message to", "Leila Haddad?"),
    ("Book me a flight to", "Rome on Friday."),
    ("How long does it take", "to boil an egg?"),
    ("The meeting with", "Tomasz Nowak is at three."),
    # Pauses inside a number or after a name, where the first part reads whole.
    ("My phone number is zero seven one", "four four nine two."),
    ("The code is three three", "eight one."),
    ("Please call Anna", "Schmidt at the office."),
    ("I need four", "tickets for Saturday."),
)
# What earlier tuning (the smart rule's thresholds, the punctuation rule) looked at.
EARLIER = (
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
TUNED_ON = (
    *EARLIER,
    *(sentence for sentences in TUNING.values() for sentence in sentences),
    *(f"{first} {second}" for first, second in PAUSED_TUNING),
)
SETS = {"heldout": (HELD_OUT, PAUSED), "tuning": (TUNING, PAUSED_TUNING)}

# The rule before the graded one, for comparison: sure (0.8) and a sentence's end at the
# first pause; at 480 ms a sentence's end, or the model asked again and 0.5; then 1 s.
SMART = (
    Check(160, done=0.8),
    Check(480, done=0.0),
    Check(480, open=0.5, trailing=0.5, ask=True),
)
MODES = {
    "fixed": Endpointing(turn_model=False, check_silence_ms=600, end_silence_ms=600),
    "smart": Endpointing(checks=SMART, open_words=frozenset()),
    "graded": Endpointing(),
    "graded-wait": Endpointing(),  # graded, the reply not started ahead (see below)
}
# Modes whose session does not start the reply ahead at the recogniser's likely end of turn
# (``SessionConfig.preemptive_generation``, on by default): it starts at the final.
WAITING = {"graded-wait"}
LLM_DELAY_S = 0.0  # --llm-delay-ms: the scripted LLM's time to its first token

_HELD = {*(s for sentences in HELD_OUT.values() for s in sentences)}
_HELD |= {f"{first} {second}" for first, second in PAUSED}
assert not _HELD & set(TUNED_ON), "held-out utterances must not be the tuning ones"


# ---------------------------------------------------------------- speech


def espeak(text: str, folder: Path, wpm: int = 165) -> np.ndarray:
    path = folder / "espeak.wav"
    command = ["espeak-ng", "-v", "en-us", "-s", str(wpm), "-w", str(path), text]
    subprocess.run(command, check=True)
    with wave.open(str(path)) as recording:
        rate = recording.getframerate()
        samples = pcm16_to_float(recording.readframes(recording.getnframes()))
    return resample(samples, rate, RATE)


def _piper_at(text: str, length_scale: float) -> np.ndarray:
    from piper import SynthesisConfig

    voice = tts_local._VOICE.get()
    config = SynthesisConfig(length_scale=length_scale)
    chunks = list(voice.synthesize(text, syn_config=config))
    samples = np.concatenate([chunk.audio_float_array for chunk in chunks])
    return resample(samples.astype(np.float32), chunks[0].sample_rate, RATE)


async def piper(text: str, wpm: int) -> np.ndarray:
    """Piper at ``wpm``: the length scale that makes the utterance last words / wpm
    minutes, interpolated from two trial scales (a scale does not stretch pauses alike)."""
    tts_local._VOICE.preload()
    await tts_local._VOICE.ready()
    wanted = len(text.split()) / wpm * 60 * RATE
    at_1, at_13 = [len(trimmed(await asyncio.to_thread(_piper_at, text, s))) for s in (1, 1.3)]
    scale = 1 + 0.3 * (wanted - at_1) / max(1, at_13 - at_1)
    return await asyncio.to_thread(_piper_at, text, min(2.0, max(0.6, scale)))


async def speak(voice: str, text: str, folder: Path, wpm: int | None = None) -> np.ndarray:
    """``text`` said by ``voice`` at ``wpm`` words a minute (None: the voice's own rate)."""
    if voice == "espeak-ng":
        return espeak(text, folder) if wpm is None else espeak(text, folder, wpm)
    if wpm is None:
        tts_local._VOICE.preload()
        await tts_local._VOICE.ready()
        return await asyncio.to_thread(_piper_at, text, 1.0)
    return await piper(text, wpm)


def last_word_byte(pcm: bytes) -> int:
    samples = np.abs(np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768)
    loud = np.nonzero(samples > SPEECH_FLOOR)[0]
    return int(loud[-1]) * 2 if loud.size else 0


def last_word_frame(pcm: bytes) -> int:
    """The 20 ms frame that holds the recording's last sample louder than -40 dBFS."""
    return last_word_byte(pcm) // FRAME


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


async def converse(
    pcm: bytes, rules: Endpointing, frame_ms: int, *, whole: bool = True, preemptive: bool = True
) -> dict[str, Any]:
    """Feed ``pcm`` in real time to a new session, in ``frame_ms`` frames; its turns,
    finals and first audio. For a ``whole`` utterance feeding stops once a turn answered
    after the last word (the rest of the recording is silence)."""
    metrics: list[TurnMetrics] = []
    finals: list[str] = []

    async def emit(event: Stamped) -> None:
        if isinstance(event.event, TurnEvent):
            finals.append(event.event.text)

    async def send_audio(chunk: bytes) -> None:
        return None

    llm = FakeLLM(script=[[Delay(LLM_DELAY_S), REPLY] if LLM_DELAY_S else [REPLY]] * 100)
    session = VoiceSession(
        config=SessionConfig(
            session_id="bench",
            resume_token="-",
            workspace_id=1,
            llm_name="bench",
            preemptive_generation=preemptive,
        ),
        llm=llm,
        tool_runner=FakeToolRunner(),
        emit=emit,
        send_audio=send_audio,
        stt=LocalSTT(endpointing=rules),
        tts=LocalTTS(),
        on_turn_metrics=metrics.append,
    )
    await session.start()
    frame = RATE * frame_ms // 1000 * 2
    last_byte, last_word_at = last_word_byte(pcm), None

    def answered() -> bool:
        return last_word_at is not None and any(
            m.first_audio_at is not None and m.first_audio_at > last_word_at for m in metrics
        )

    began = time.monotonic()
    for index, start in enumerate(range(0, len(pcm), frame)):
        await session.push_audio(pcm[start : start + frame])
        if start <= last_byte < start + frame:
            last_word_at = time.monotonic()
        if whole and answered():
            break
        await asyncio.sleep(max(0.0, began + (index + 1) * frame_ms / 1000 - time.monotonic()))
    for _ in range(1000):  # up to 10 s for the turn's figures
        if metrics:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)  # a second turn that was cut off arrives too
    await session.close()
    return {
        "metrics": metrics,
        "finals": finals,
        "last_word_at": last_word_at,
        "llm_requests": len(llm.requests),
    }


async def replay(
    pcm: bytes, rules: Endpointing, frame_ms: int, *, whole: bool = True
) -> dict[str, Any]:
    """The decision alone, in the recording's own time, as if the models took no time:
    ``pcm`` fed to the recogniser frame by frame, each frame only once every decode and
    verdict it started is done (no partial transcripts). Where the turn ended after the
    last word, in ms of audio; a load-free figure of the rule, not of the machine."""
    rules = dataclasses.replace(rules, partial_interval_ms=10**9)
    stream = await LocalSTT(endpointing=rules).open(sample_rate=RATE)
    frame, last_byte = RATE * frame_ms // 1000 * 2, last_word_byte(pcm)
    ends: list[int] = []
    for start in range(0, len(pcm), frame):
        speaking = stream._utterance is not None
        await stream.push_audio(pcm[start : start + frame])
        while any(not task.done() for task in stream._decodes):
            await asyncio.sleep(0.002)
            if speaking and stream._utterance is None:
                break
        if speaking and stream._utterance is None:
            ends.append(start + frame)
        if whole and ends and ends[-1] > last_byte:
            break
    finals: list[str] = []
    for _ in range(1000):
        if not any(not task.done() for task in stream._decodes):
            break
        await asyncio.sleep(0.01)
    await stream.aclose()
    async for event in stream.events():
        if isinstance(event, FinalTranscript):
            finals.append(event.text)
    after = [(end - last_byte) * 1000 / (RATE * 2) for end in ends if end > last_byte]
    return {"finals": finals, "turns": len(ends), "end_ms": after[0] if after else None}


def turn_figures(result: dict[str, Any]) -> dict[str, float | None]:
    turns: list[TurnMetrics] = result["metrics"]
    if not turns:
        return {}
    last, said = turns[-1], result["last_word_at"]  # the turn that holds the last word

    def since_last_word(at: float | None) -> float | None:
        return None if at is None or said is None else round((at - said) * 1000, 1)

    return {
        "voice_to_voice_ms": since_last_word(last.first_audio_at),
        "vad_release_ms": since_last_word(last.speech_end_at),
        "end_of_utterance_ms": last.end_of_utterance_ms,
        "stt_final_ms": last.stt_final_ms,
        "tts_first_byte_ms": last.tts_first_byte_ms,
        "final_to_audio_ms": last.input_to_first_audio_ms,
        # The reply was started ahead, at the likely end of turn, and released at the final.
        "preempted": last.llm_request_at is not None and last.llm_request_at < last.input_at,
    }


# ---------------------------------------------------------------- the run


def quantiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)

    def rank(q: float) -> float:
        return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 1)

    return {"p50": rank(0.5), "p90": rank(0.9), "max": rank(1.0), "n": len(ordered)}


STAGES = (
    "voice_to_voice_ms",
    "end_of_turn_ms",
    "vad_release_ms",
    "end_of_utterance_ms",
    "stt_final_ms",
    "tts_first_byte_ms",
    "final_to_audio_ms",
)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    words = sum(row["words"] for row in rows)
    errors = sum(row["errors"] for row in rows)
    figures: dict[str, Any] = {
        stage: quantiles([row[stage] for row in rows if row.get(stage) is not None])
        for stage in STAGES
    }
    figures["wer_pct"] = round(100 * errors / max(1, words), 1)
    return figures


def groups(rows: list[dict[str, Any]], *keys: str) -> dict[str, Any]:
    keyed: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        keyed.setdefault("/".join(str(row[key]) for key in keys), []).append(row)
    return {name: summary(members) for name, members in sorted(keyed.items())}


def whole_row(
    mode: str, key: tuple[Any, ...], frame_ms: int, result: dict[str, Any]
) -> dict[str, Any]:
    kind, voice, wpm, sentence = key
    heard = " ".join(result["finals"])
    reference = normalise(sentence)
    return {"mode": mode, "kind": kind, "voice": voice, "wpm": wpm, "frame_ms": frame_ms,
            "sentence": sentence, "heard": heard, "turns": len(result["finals"]),
            "words": len(reference), "errors": edit_distance(reference, normalise(heard)),
            "load_1m": round(os.getloadavg()[0], 2), "end_of_turn_ms": result.get("end_ms"),
            "llm_requests": result.get("llm_requests"),
            **(turn_figures(result) if "metrics" in result else {})}  # fmt: skip


async def measure(
    modes: list[str], recordings: dict[str, Any], frames: list[int], *, replayed: bool
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Every recording under every rule, the rules taking turns on each recording (so a
    change in the machine's load falls on all of them alike)."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {m: {"rows": [], "paused": []} for m in modes}
    run = replay if replayed else converse
    for frame_ms in frames:
        for key, pcm in recordings["whole"].items():
            for mode in modes:
                result = await run(pcm, MODES[mode], frame_ms, **_session(mode, replayed))
                out[mode]["rows"].append(whole_row(mode, key, frame_ms, result))
                progress(out[mode]["rows"][-1])
        for (voice, wpm, sentence), pcm in recordings["paused"].items():
            for mode in modes:
                result = await run(
                    pcm, MODES[mode], frame_ms, whole=False, **_session(mode, replayed)
                )
                out[mode]["paused"].append(
                    {
                        "voice": voice,
                        "wpm": wpm,
                        "frame_ms": frame_ms,
                        "sentence": sentence,
                        "turns": result.get("turns", len(result["finals"])),
                        "llm_requests": result.get("llm_requests"),
                        "heard": result["finals"],
                    }
                )
    return out


def _session(mode: str, replayed: bool) -> dict[str, Any]:
    return {} if replayed else {"preemptive": mode not in WAITING}


def progress(row: dict[str, Any]) -> None:
    """One line a conversation on stderr, for a long run."""
    fields: tuple[str, ...] = ("mode", "kind", "voice", "wpm", "frame_ms")
    fields += ("voice_to_voice_ms", "end_of_turn_ms", "heard")
    print(" ".join(str(row.get(name)) for name in fields), file=sys.stderr, flush=True)


def report(mode: str, rows: list[dict[str, Any]], paused: list[dict[str, Any]]) -> dict[str, Any]:
    loads = [row["load_1m"] for row in rows]
    return {
        **summary(rows),
        "false_cuts": sum(1 for cut in paused if cut["turns"] > 1),
        "paused_recordings": len(paused),
        "false_cuts_by_voice": {
            voice: sum(1 for c in paused if c["voice"] == voice and c["turns"] > 1)
            for voice in sorted({c["voice"] for c in paused})
        },
        "load_1m_during": [min(loads), max(loads)] if loads else None,
        "preempted_turns": sum(1 for row in rows if row.get("preempted")),
        # LLM requests per turn the user heard answered, paused recordings included: above
        # 1, replies started ahead and discarded (the user went on after a pause).
        "llm_requests_per_turn": _per_turn(rows + paused),
        "by_kind": groups(rows, "kind"),
        "by_voice_frame": groups(rows, "voice", "frame_ms"),
        "by_kind_voice_frame": groups(rows, "kind", "voice", "frame_ms"),
        "rows": rows,
        "paused": paused,
    }


def _per_turn(rows: list[dict[str, Any]]) -> float | None:
    asked = [row for row in rows if row.get("llm_requests") is not None]
    turns = sum(row["turns"] for row in asked)
    return round(sum(row["llm_requests"] for row in asked) / turns, 2) if turns else None


def chosen(everything: Iterable[Any], count: int) -> list[Any]:
    return list(everything)[:count]


async def record(
    voices: list[str], chosen_set: str, kinds: list[str], count: int
) -> dict[str, Any]:
    sentences, paused_sentences = SETS[chosen_set]
    whole, paused = {}, {}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for voice in voices:
            for kind in kinds:
                for index, sentence in enumerate(chosen(sentences[kind], count)):
                    wpm = RATES_WPM[index % len(RATES_WPM)]
                    samples = await speak(voice, sentence, folder, wpm)
                    whole[kind, voice, wpm, sentence] = recording(samples)
            for index, (first, second) in enumerate(chosen(paused_sentences, 2 * count)):
                wpm = RATES_WPM[index % len(RATES_WPM)]
                spoken = trimmed(await speak(voice, f"{first} {second}", folder, wpm))
                near = len(trimmed(await speak(voice, first, folder, wpm)))
                paused[voice, wpm, f"{first} … {second}"] = recording(*split(spoken, near))
    return {"whole": whole, "paused": paused}


async def main(
    voices: list[str], chosen_set: str, kinds: list[str], frames: list[int], modes: list[str],
    count: int, replayed: bool,
) -> dict[str, Any]:  # fmt: skip
    recordings = await record(voices, chosen_set, kinds, count)
    warm = recordings["whole"][next(iter(recordings["whole"]))]
    await converse(warm, MODES[modes[-1]], frames[0], preemptive=modes[-1] not in WAITING)
    load_before = [round(x, 2) for x in os.getloadavg()]
    started = time.monotonic()
    measured = await measure(modes, recordings, frames, replayed=replayed)
    return {
        "benchmark": "voice_to_voice",
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, "
        f"python {platform.python_version()}",
        "set": chosen_set,
        "replay": replayed,
        "load_average_before": load_before,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "minutes": round((time.monotonic() - started) / 60, 1),
        "voices": voices,
        "frames_ms": frames,
        "kinds": kinds,
        "reply": REPLY,
        "llm_delay_ms": round(LLM_DELAY_S * 1000),
        "modes": {mode: report(mode, **measured[mode]) for mode in modes},
    }


def _ms(figures: dict[str, Any], stage: str, key: str = "p50") -> str:
    return f"{(figures.get(stage) or {}).get(key, float('nan')):.0f}"


def table(result: dict[str, Any]) -> str:
    metric = "end_of_turn_ms" if result["replay"] else "voice_to_voice_ms"
    lines = [f"set {result['set']}; load average {result['load_average_before']} before, "
             f"{result['load_average_after']} after ({result['minutes']} min)",
             f"mode         {metric[:3]} p50/p90   vad release  end-of-utt  stt final  tts 1st byte"
             "   WER %  false cuts   load 1m"]  # fmt: skip
    for mode, figures in result["modes"].items():
        lines.append(
            f"{mode:<12}{_ms(figures, metric)}/{_ms(figures, metric, 'p90'):<10}"
            f"{_ms(figures, 'vad_release_ms'):>8}{_ms(figures, 'end_of_utterance_ms'):>12}"
            f"{_ms(figures, 'stt_final_ms'):>11}{_ms(figures, 'tts_first_byte_ms'):>13}"
            f"{figures['wer_pct']:>9}{figures['false_cuts']:>7}/{figures['paused_recordings']:<6}"
            f"{figures['load_1m_during']}"
        )
    for mode, figures in result["modes"].items():
        if not result["replay"]:
            lines.append(
                f"{mode}: final -> first audio {_ms(figures, 'final_to_audio_ms')}/"
                f"{_ms(figures, 'final_to_audio_ms', 'p90')} ms; {figures['preempted_turns']}/"
                f"{len(figures['rows'])} replies started ahead; "
                f"{figures['llm_requests_per_turn']} LLM requests a turn"
            )
    groups_of = ("by_kind", "by_voice_frame")
    for group in groups_of:
        lines.append("")
        names = sorted(next(iter(result["modes"].values()))[group])
        lines.append(
            f"{group[3:]:<22}" + "".join(f"{mode + ' p50/p90':>20}" for mode in result["modes"])
        )
        for name in names:
            cells = []
            for figures in result["modes"].values():
                row = figures[group].get(name, {})
                cells.append(f"{_ms(row, metric)}/{_ms(row, metric, 'p90')}")
            lines.append(f"{name:<22}" + "".join(f"{cell:>20}" for cell in cells))
    return "\n".join(lines)


def _listed(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=sorted(SETS), default="heldout")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--voices", default="espeak-ng,piper")
    parser.add_argument("--frames", default="20,40", help="frame sizes, ms")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--quick", action="store_true", help="3 utterances of each kind")
    parser.add_argument(
        "--replay",
        action="store_true",
        help="the decision alone, in the recording's time, the models taking no time",
    )
    parser.add_argument("--json", type=Path, help="also write the JSON here")
    parser.add_argument(
        "--llm-delay-ms",
        type=float,
        default=0.0,
        help="the scripted LLM's time to its first token (0: instant)",
    )
    args = parser.parse_args()
    LLM_DELAY_S = args.llm_delay_ms / 1000
    voices = _listed(args.voices)
    if "espeak-ng" in voices and shutil.which("espeak-ng") is None:
        sys.exit("espeak-ng is needed (apt-get install espeak-ng), or --voices piper")
    outcome = asyncio.run(
        main(
            voices,
            args.set,
            _listed(args.kinds),
            [int(f) for f in _listed(args.frames)],
            _listed(args.modes),
            3 if args.quick else 100,
            args.replay,
        )
    )
    text = json.dumps(outcome, indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)
    print()
    print(table(outcome))
