"""Word error rate of the offline recogniser, without and with an agent's vocabulary hints.

A fixed set of sentences (plain ones, and coding requests like the seed's "Open index.js
and add a greet() that returns 'hi'") is spoken by two offline voices: espeak-ng (Debian's
``espeak-ng``, US English) and Piper (the platform's own voice, ``joe``). Each recording
(1 s of silence, the speech, 1.5 s of silence) goes through the real offline recogniser
(``LocalSTT``: the voice-activity detector, then Whisper) in 20 ms frames, once without
hints and once with the coding agent's vocabulary (``VOCABULARY``), which becomes
Whisper's initial prompt. Every final transcript of a recording is joined.

Normalisation, applied to reference and transcript alike before counting: lower case;
digits spelled out as words (the platform's own ``cardinal_words``: "3" = "three");
apostrophes dropped ("it's" = "its"); every other character that is not a letter or a
digit becomes a space, so punctuation never counts ("greet()" = "greet", "'hi'" = "hi",
"index.js" = "index js"). What the normalisation does not forgive: a spoken spelling such
as "index dot js" for "index.js" (one inserted word), or "Index.js" split differently.
WER = (substitutions + deletions + insertions) / reference words, over the whole set.

Other languages, where the optional multilingual Whisper is installed (``python -m
engine.providers.stt.local.multilingual install``): six sentences each in Spanish, French
and German, spoken by espeak-ng in that language, heard by the recogniser told the
language and told to detect it (the ``languages`` column). Their words are compared
lower-cased, letters of any alphabet kept, punctuation dropped; they hold no digits.

Prints one JSON object, then a short table. A measurement, not a test.

    .venv/bin/python bench/wer.py            (needs espeak-ng: apt-get install espeak-ng)
    .venv/bin/python bench/wer.py --languages    (the other languages only)
"""

from __future__ import annotations

import asyncio
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import wave
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.providers.audio import float_to_pcm16, pcm16_to_float, resample
from engine.providers.base import FinalTranscript
from engine.providers.stt.local import multilingual
from engine.providers.stt.local.adapter import LocalSTT, whisper_prompt
from engine.providers.tts.local.adapter import LocalTTS
from engine.text.voice_cleaner import cardinal_words

RATE = 16_000
FRAME_BYTES = RATE * 20 // 1000 * 2

PLAIN = (
    "What is the weather in Paris today?",
    "Please book a table for four people at eight tonight.",
    "My order has not arrived yet and I would like a refund.",
    "Can you remind me to call my sister tomorrow morning?",
    "How long does it take to drive from Lyon to Marseille?",
    "Turn off the lights in the kitchen and lock the front door.",
    "I need to change the delivery address for my last order.",
    "What time does the pharmacy on Main Street close?",
)
CODING = (
    "Open index.js and add a greet() that returns 'hi'.",
    "Rename the function fetchWeather to getForecast.",
    "Add a useState hook called count to App.tsx.",
    "Write a test for greet() in index.test.js.",
    "Import React and export the Counter component.",
    "Delete line twelve of package.json.",
    "Change the README.md title to Voice Agent.",
    "Make parseConfig return null when the file is empty.",
)
# Per language: what espeak-ng's voice is called, and sentences without digits.
LANGUAGES = {
    "es": ("es", (
        "Quiero reservar una mesa para esta noche.",
        "Mi pedido no ha llegado todavía.",
        "¿Qué tiempo hace hoy en Madrid?",
        "Apaga las luces de la cocina, por favor.",
        "Necesito cambiar la dirección de entrega.",
        "¿A qué hora cierra la farmacia?",
    )),
    "fr": ("fr", (
        "Je voudrais réserver une table pour ce soir.",
        "Ma commande n'est pas encore arrivée.",
        "Quel temps fait-il aujourd'hui à Paris?",
        "Éteins les lumières de la cuisine, s'il te plaît.",
        "Je dois changer l'adresse de livraison.",
        "À quelle heure ferme la pharmacie?",
    )),
    "de": ("de", (
        "Ich möchte einen Tisch für heute Abend reservieren.",
        "Meine Bestellung ist noch nicht angekommen.",
        "Wie ist das Wetter heute in Berlin?",
        "Mach bitte das Licht in der Küche aus.",
        "Ich muss die Lieferadresse ändern.",
        "Wann schließt die Apotheke?",
    )),
}  # fmt: skip
VOCABULARY = [
    "index.js", "greet()", "hi", "fetchWeather", "getForecast", "useState", "App.tsx",
    "index.test.js", "React", "Counter", "package.json", "README.md", "parseConfig", "null",
]  # fmt: skip


# ---------------------------------------------------------------- word error rate

_WORD = re.compile(r"[a-z0-9]+")
_DIGITS = re.compile(r"\d+")


def normalise(text: str) -> list[str]:
    text = text.lower().replace("'", "").replace("’", "")
    text = _DIGITS.sub(lambda m: " " + cardinal_words(int(m[0])) + " ", text)
    return _WORD.findall(text)


def edit_distance(reference: list[str], hypothesis: list[str]) -> int:
    previous = list(range(len(hypothesis) + 1))
    for i, word in enumerate(reference, 1):
        current = [i]
        for j, heard in enumerate(hypothesis, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (word != heard))
            )
        previous = current
    return previous[-1]


# ---------------------------------------------------------------- speech


def words_of(text: str) -> list[str]:
    """Any language's words: lower case, letters of any alphabet, apostrophes dropped."""
    return re.findall(r"[^\W_]+", text.lower().replace("'", "").replace("’", ""))


def espeak(text: str, folder: Path, voice: str = "en-us") -> np.ndarray:
    path = folder / "espeak.wav"
    subprocess.run(["espeak-ng", "-v", voice, "-s", "165", "-w", str(path), text], check=True)
    with wave.open(str(path)) as recording:
        rate = recording.getframerate()
        samples = pcm16_to_float(recording.readframes(recording.getnframes()))
    return resample(samples, rate, RATE)


async def piper(text: str) -> np.ndarray:
    pcm = b"".join([chunk async for chunk in LocalTTS().synthesize(text)])
    return resample(pcm16_to_float(pcm), 24_000, RATE)


async def transcribe(samples: np.ndarray, vocabulary: list[str], language: str = "en") -> str:
    pcm = float_to_pcm16(
        np.concatenate([np.zeros(RATE), samples, np.zeros(int(RATE * 1.5))]).astype(np.float32)
    )
    stream = await LocalSTT(vocabulary=vocabulary, language=language).open(sample_rate=RATE)
    finals: list[str] = []

    async def collect() -> None:
        async for event in stream.events():
            if isinstance(event, FinalTranscript):
                finals.append(event.text)

    reader = asyncio.create_task(collect())
    for start in range(0, len(pcm), FRAME_BYTES):
        await stream.push_audio(pcm[start : start + FRAME_BYTES])
    # Frames went in faster than real time: wait until the decodes they started are done.
    for _ in range(600):
        await asyncio.sleep(0.05)
        if not stream._decodes:
            break
    await stream.aclose()
    await reader
    return " ".join(finals)


# ---------------------------------------------------------------- the run


async def measure(voices: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for voice, recordings in voices.items():
        for sentence, samples in recordings.items():
            reference = normalise(sentence)
            for hints in ("without", "with"):
                heard = await transcribe(samples, VOCABULARY if hints == "with" else [])
                rows.append({
                    "voice": voice,
                    "kind": "coding" if sentence in CODING else "plain",
                    "hints": hints,
                    "reference": sentence,
                    "heard": heard,
                    "words": len(reference),
                    "errors": edit_distance(reference, normalise(heard)),
                })  # fmt: skip
    return {"rows": rows, "summary": summarise(rows)}


def summarise(rows: list[dict[str, Any]]) -> dict[str, float]:
    summary: dict[str, float] = {}
    for voice in [*sorted({row["voice"] for row in rows}), "all"]:
        for kind in ("plain", "coding", "all"):
            for hints in ("without", "with"):
                chosen = [
                    row for row in rows
                    if voice in (row["voice"], "all") and kind in (row["kind"], "all")
                    and row["hints"] == hints
                ]  # fmt: skip
                words = sum(row["words"] for row in chosen)
                errors = sum(row["errors"] for row in chosen)
                summary[f"{voice}/{kind}/{hints}"] = round(100 * errors / words, 1)
    return summary


async def measure_languages() -> dict[str, float]:
    """WER % per language, the recogniser told the language and told to detect it."""
    summary: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        for code, (voice, sentences) in LANGUAGES.items():
            for told in (code, "detect"):
                words = errors = 0
                for sentence in sentences:
                    samples = espeak(sentence, Path(folder), voice)
                    heard = await transcribe(samples, [], told)
                    reference = words_of(sentence)
                    words += len(reference)
                    errors += edit_distance(reference, words_of(heard))
                key = "told" if told == code else "detect"
                summary[f"{code}/{key}"] = round(100 * errors / words, 1)
    return summary


def print_languages(summary: dict[str, float]) -> None:
    print("WER %            told the language   detect")
    for code in LANGUAGES:
        print(f"{code:<17}{summary[f'{code}/told']:>17.1f}{summary[f'{code}/detect']:>9.1f}")


async def main() -> None:
    if shutil.which("espeak-ng") is None:
        sys.exit("espeak-ng is needed (apt-get install espeak-ng)")
    offline_languages = multilingual.available()
    if sys.argv[1:] == ["--languages"]:
        if not offline_languages:
            sys.exit("the multilingual Whisper is not installed (see the docstring)")
        summary = await measure_languages()
        print(json.dumps({"languages": summary, "machine": platform.machine()}, indent=1))
        print_languages(summary)
        return
    sentences = PLAIN + CODING
    with tempfile.TemporaryDirectory() as folder:
        spoken = {
            "espeak-ng": {s: espeak(s, Path(folder)) for s in sentences},
            "piper-joe": {s: await piper(s) for s in sentences},
        }
    result = await measure(spoken)
    result.update(
        machine=platform.machine(),
        sentences={"plain": len(PLAIN), "coding": len(CODING)},
        vocabulary=VOCABULARY,
        whisper_prompt=whisper_prompt(VOCABULARY),
    )
    if offline_languages:
        result["languages"] = await measure_languages()
    print(json.dumps(result, indent=1))
    print()
    print("WER %            without hints   with hints")
    for key in ("all/plain", "all/coding", "all/all", "espeak-ng/all", "piper-joe/all"):
        without, with_ = result["summary"][f"{key}/without"], result["summary"][f"{key}/with"]
        print(f"{key:<17}{without:>13.1f}{with_:>13.1f}")
    if offline_languages:
        print()
        print_languages(result["languages"])


if __name__ == "__main__":
    asyncio.run(main())
