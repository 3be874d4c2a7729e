"""Phone audio: voice to voice over a phone line, and what 8 kHz μ-law costs the offline
recogniser in words.

1. Word error rate. The sentences of ``bench/wer.py`` (8 plain, 8 coding requests), spoken
   by espeak-ng, go through the offline recogniser (``LocalSTT``) twice: at 16 kHz, as a
   browser sends them, and as a phone line carries them: sox turns the same recording into
   8 kHz μ-law (G.711, what Twilio and Telnyx stream), which is decoded and resampled to
   16 kHz the way the media-stream door does it (``audioop``'s G.711 table, soxr HQ). Each
   without and with the coding agent's vocabulary hints; normalised and counted as in
   ``bench/wer.py``.

2. Voice to voice through a real daphne. The platform runs on its embedded defaults (offline
   Whisper and Piper, an instant scripted LLM) in a subprocess. Per sentence, once through
   each door on the same daphne, with the same agent (no greeting):
   - phone: a signed Twilio voice webhook, then the fake carrier (``FakeTwilioCall``: Twilio
     Media Streams over a WebSocket, a 20 ms μ-law frame every 20 ms) says the sentence
     (espeak-ng, sox: 8 kHz μ-law) and times the first ``media`` frame that comes back;
   - browser: ``/v1/session`` with the workspace's publishable key, PCM16 at 16 kHz in
     20 ms frames in real time, the first binary audio frame that comes back.
   From the frame holding the recording's last voiced sample (louder than -40 dBFS) to the
   first audio frame of the reply. Each sentence is a new call (and a new session).

Prints one JSON object, then a short table. A measurement, not a test; on a loaded machine
say so (the load average is printed).

    .venv/bin/python bench/phone.py [--quick]     (needs espeak-ng and sox)
"""

from __future__ import annotations

import argparse
import asyncio
import audioop  # G.711 μ-law, as the door decodes it
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import soxr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.voice_to_voice import REPLY, SENTENCES, quantiles
from bench.wer import (
    CODING,
    PLAIN,
    RATE,
    VOCABULARY,
    edit_distance,
    espeak,
    normalise,
    summarise,
    transcribe,
)
from engine.providers.audio import pcm16_to_float
from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer, text_reply
from tests.fakes.twilio_media import FakeTwilioCall, spoken_ulaw
from tests.telephony_app.carrier import TWILIO_SID, TWILIO_TOKEN
from tests.telephony_app.platform import Platform, running_platform

CALLER = "+447700900123"
WIDE, PHONE = "16 kHz", "phone 8 kHz μ-law"
ULAW_FLOOR = 0.01 * 32768  # -40 dBFS
FRAME_16K = 640  # 20 ms of PCM16 at 16 kHz


# ---------------------------------------------------------------- 1. word error rate


def phone_line(wav: Path, folder: Path) -> np.ndarray:
    """``wav`` as a phone line carries it (sox: 8 kHz μ-law), back at 16 kHz as the door
    hands it to the recogniser."""
    ulaw = folder / "line.ulaw"
    subprocess.run(
        ["sox", str(wav), "-r", "8000", "-c", "1", "-e", "mu-law", "-t", "raw", str(ulaw)],
        check=True,
    )
    narrow = np.frombuffer(audioop.ulaw2lin(ulaw.read_bytes(), 2), dtype=np.int16)
    wide = soxr.resample(narrow, 8000, RATE, quality="HQ")
    return pcm16_to_float(wide.astype(np.int16).tobytes())


async def word_errors(sentences: tuple[str, ...], folder: Path) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for sentence in sentences:
        recordings = {WIDE: espeak(sentence, folder)}  # writes folder/espeak.wav
        recordings[PHONE] = phone_line(folder / "espeak.wav", folder)
        reference = normalise(sentence)
        for line, samples in recordings.items():
            for hints in ("without", "with"):
                heard = await transcribe(samples, VOCABULARY if hints == "with" else [])
                rows.append({
                    "voice": line, "kind": "coding" if sentence in CODING else "plain",
                    "hints": hints, "reference": sentence, "heard": heard,
                    "words": len(reference), "errors": edit_distance(reference, normalise(heard)),
                })  # fmt: skip
    return {"rows": rows, "summary": summarise(rows)}


# ---------------------------------------------------------------- 2. voice to voice


def last_voiced(pcm: bytes) -> int:
    """The byte offset of the last sample louder than -40 dBFS in PCM16."""
    samples = np.abs(np.frombuffer(pcm, dtype="<i2").astype(np.int32))
    loud = np.nonzero(samples > ULAW_FLOOR)[0]
    return int(loud[-1]) * 2 if loud.size else 0


async def phone_turn(platform: Platform, voice_url: str, sentence: str, n: int) -> float | None:
    """Ms from the caller's last word to the first reply audio on the line."""
    ulaw = await asyncio.to_thread(spoken_ulaw, sentence)
    twiml = await asyncio.to_thread(platform.answer_call, voice_url, f"CA{n:032x}", CALLER)
    stream = re.search(r'<Stream url="([^"]+)"', twiml)
    token = re.search(r'name="token" value="([^"]+)"', twiml)
    assert stream is not None and token is not None, twiml
    call = FakeTwilioCall(stream[1], call_sid=f"CA{n:032x}", parameters={"token": token[1]})
    async with call:
        await asyncio.sleep(1.0)  # the session opens (no greeting)
        voiced_end = last_voiced(audioop.ulaw2lin(ulaw, 2)) // 2  # in μ-law bytes
        last_word = call.when_sent(call.said_sent + voiced_end)
        call.say(ulaw, then_silence_s=4.0)
        said_at = await last_word
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            replies = [
                at for message, at in zip(call.received, call.arrivals, strict=False)
                if message.get("event") == "media" and at > said_at
            ]  # fmt: skip
            if replies:
                await call.hang_up()
                return round((replies[0] - said_at) * 1000, 1)
            await asyncio.sleep(0.01)
        await call.hang_up()
    return None


async def browser_turn(platform: Platform, sentence: str, folder: Path) -> float | None:
    """Ms from the user's last word to the first reply audio, through ``/v1/session``."""
    from websockets.asyncio.client import connect

    samples = espeak(sentence, folder)
    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
    pcm = bytes(FRAME_16K * 5) + pcm + bytes(RATE * 2 * 4)
    last_frame = (last_voiced(pcm) // FRAME_16K) * FRAME_16K
    url = platform.url.replace("http", "ws", 1) + f"/v1/session?key={platform.publishable_key}"
    loop = asyncio.get_running_loop()
    async with connect(url, origin="http://localhost:3000", max_size=2**22) as socket:  # type: ignore[arg-type]
        await socket.send(json.dumps({"type": "configure", "agent": "bench", "mode": "voice"}))
        while json.loads(await socket.recv()).get("type") != "ready":
            pass
        said_at: list[float] = []
        first_audio: list[float] = []

        async def listen() -> None:
            async for message in socket:
                if isinstance(message, bytes) and said_at and not first_audio:
                    first_audio.append(loop.time())

        listener = asyncio.create_task(listen())
        next_at = loop.time()
        for start in range(0, len(pcm), FRAME_16K):
            await socket.send(pcm[start : start + FRAME_16K])
            if start == last_frame:
                said_at.append(loop.time())
            if first_audio:
                break
            next_at += 0.02
            await asyncio.sleep(max(0.0, next_at - loop.time()))
        listener.cancel()
    return round((first_audio[0] - said_at[0]) * 1000, 1) if first_audio and said_at else None


async def voice_to_voice(sentences: tuple[str, ...], folder: Path) -> dict[str, Any]:
    llm = FakeOpenAIServer(default=text_reply(REPLY))
    await llm.start()
    try:
        with running_platform(
            folder / "platform", LLM_BASE_URL=llm.base_url, LLM_API_KEY="bench-llm-key"
        ) as running:  # fmt: skip
            number = await asyncio.to_thread(_setup, running)
            phone, browser = [], []
            for n, sentence in enumerate(sentences):
                phone.append(await phone_turn(running, number["voice_webhook_url"], sentence, n))
                browser.append(await browser_turn(running, sentence, folder))
    finally:
        await llm.stop()
    return {
        "phone": quantiles([v for v in phone if v is not None]),
        "browser": quantiles([v for v in browser if v is not None]),
        "missed": {"phone": phone.count(None), "browser": browser.count(None)},
        "per_sentence_ms": {"phone": phone, "browser": browser},
    }


def _setup(running: Platform) -> dict[str, Any]:
    running.api("POST", "agents", {"name": "Bench", "slug": "bench", "instructions": "Reply."})
    running.api("POST", "carrier-accounts", {
        "carrier": "twilio", "name": "Main", "account_sid": TWILIO_SID, "credential": TWILIO_TOKEN,
    })  # fmt: skip
    return dict(
        running.api(
            "POST", "phone-numbers", {"account": "Main", "number": "+14155550100", "agent": "bench"}
        )
    )


# ---------------------------------------------------------------- the run


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="4 sentences of each kind, 4 calls")
    args = parser.parse_args()
    for tool in ("espeak-ng", "sox"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is needed (apt-get install espeak-ng sox)")
    wer_set = PLAIN[:4] + CODING[:4] if args.quick else PLAIN + CODING
    calls = SENTENCES[:4] if args.quick else SENTENCES
    load_before = os.getloadavg()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        words = await word_errors(wer_set, Path(folder))
        latency = await voice_to_voice(calls, Path(folder))
    result = {
        "wer": words, "voice_to_voice_ms": latency,
        "machine": platform.machine(), "cpus": os.cpu_count(),
        "load_average": {"start": load_before[0], "end": os.getloadavg()[0]},
        "seconds": round(time.monotonic() - started),
    }  # fmt: skip
    print(json.dumps(result, indent=1, ensure_ascii=False))
    print()
    print(f"WER %               {'without hints':>14}{'with hints':>12}")
    for line in (WIDE, PHONE):
        for kind in ("plain", "coding", "all"):
            key = f"{line}/{kind}"
            without, with_ = words["summary"][f"{key}/without"], words["summary"][f"{key}/with"]
            print(f"{line:<18} {kind:<7}{without:>6.1f}{with_:>12.1f}")
    for door in ("phone", "browser"):
        figures = latency[door] or {"p50": math.nan, "p90": math.nan, "n": 0}
        print(f"voice to voice, {door:<8} p50 {figures['p50']} ms, p90 {figures['p90']} ms "
              f"(n={figures['n']})")  # fmt: skip
    print(f"load average {load_before[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    asyncio.run(main())
