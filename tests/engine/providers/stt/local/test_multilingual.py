"""The offline recogniser in Spanish, with the optional multilingual Whisper (installed
with ``python -m engine.providers.stt.local.multilingual install``), on speech espeak-ng
says in Spanish: told the language, and told to detect it."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import tempfile
import wave
from pathlib import Path

import pytest

from engine.providers.audio import float_to_pcm16, pcm16_to_float, resample
from engine.providers.base import FinalTranscript
from engine.providers.stt.local import multilingual
from engine.providers.stt.local.adapter import LocalSTT

pytestmark = pytest.mark.skipif(
    not multilingual.available() or shutil.which("espeak-ng") is None,
    reason="the multilingual Whisper (an optional install) or espeak-ng is missing",
)
SAID = "Hola, quiero reservar una mesa para cuatro personas esta noche."
FRAME = 640  # 20 ms at 16 kHz


def spanish_16k(text: str) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "said.wav"
        subprocess.run(["espeak-ng", "-v", "es", "-s", "150", "-w", str(path), text], check=True)
        with wave.open(str(path)) as recording:
            rate, pcm = recording.getframerate(), recording.readframes(recording.getnframes())
    return float_to_pcm16(resample(pcm16_to_float(pcm), rate, 16_000))


async def heard(language: str, audio: bytes) -> str:
    stt = LocalSTT(end_silence_ms=500, turn_model=False, language=language)
    stream = await stt.open(sample_rate=16_000)
    silence = bytes(FRAME * 50)
    for start in range(0, len(silence + audio + silence), FRAME):
        await stream.push_audio((silence + audio + silence)[start : start + FRAME])
    try:
        async with asyncio.timeout(60):
            async for event in stream.events():
                if isinstance(event, FinalTranscript):
                    return event.text
    finally:
        await stream.aclose()
    return ""


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


@pytest.mark.parametrize("language", ["es", "detect"])
async def test_spanish_speech_is_heard_in_spanish(language: str) -> None:
    text = await heard(language, spanish_16k(SAID))
    assert words(text) == words(SAID)


def test_the_recogniser_offers_every_language_once_installed() -> None:
    assert "es" in LocalSTT.capabilities.languages and LocalSTT.capabilities.detects_language
