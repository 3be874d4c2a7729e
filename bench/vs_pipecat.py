"""Side by side with Pipecat: the same scripted LLM and TTS servers, 1 and 50 sessions.

Both pipelines talk HTTP to the same local fakes, which run in a process of their own: an
OpenAI-compatible chat server (``FIRST_TOKEN_S`` to the first token, then ``TOKENS_PER_S``,
a reply of three sentences, one SSE chunk per word) and OpenAI's ``/audio/speech``
(``TTS_FIRST_BYTE_S`` to the first byte, then PCM16 at 24 kHz). Each pipeline runs in a
process of its own, so its CPU is its own:

- ``ours``: the platform's ``VoiceSession`` with its OpenAI-compatible LLM and OpenAI TTS
  adapters; a turn starts when the (scripted) recogniser hands over the final transcript
  and its first audio is the first frame given to the socket.
- ``pipecat``: Pipecat's ``OpenAILLMService`` and ``OpenAITTSService`` between its context
  aggregators in a ``PipelineTask``; a turn starts when the user's message is queued
  (``LLMMessagesAppendFrame(run_llm=True)``, what its aggregator does at the end of a user
  turn) and its first audio is the first ``TTSAudioRawFrame`` after the TTS. Its logging
  is set to WARNING (loguru's default DEBUG would cost it dearly).

N sessions run at once in one process, each speaking ``--turns`` turns (a random 0-200 ms
apart, the same seeds on both sides). Per turn: first audio (turn start -> first audio),
and the platform's overhead: first audio minus the floor the servers impose (first token,
the first sentence's tokens, the TTS's first byte). CPU per turn: the process's CPU time
over the run divided by its turns. Ratios are ours / Pipecat's, measured in the same run.

Pipecat is a bench-only dependency, in a venv of its own (it pins other versions of shared
packages):

    python3 -m venv .venv-pipecat && .venv-pipecat/bin/pip install -r requirements/bench.txt
    .venv/bin/python bench/vs_pipecat.py [--sessions 1,50] [--turns 10]
        [--pipecat-python .venv-pipecat/bin/python]

Prints one JSON object, then a short table. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FIRST_TOKEN_S = 0.200
TOKENS_PER_S = 50
TTS_FIRST_BYTE_S = 0.100
REPLY = (
    "Your order is on its way. "
    "It left our warehouse in Lyon this morning. "
    "You will get a text message before it arrives."
)
QUESTION = "Where is my order?"
API_KEY = "sk-test-key"
GAP_S = 0.2  # turns of a session start a random 0-200 ms after the last one ended
SETTLE_S = 0.3  # after a reply's last audio


def tokens() -> list[str]:
    return [word + " " for word in REPLY.split()]


def floor_ms() -> float:
    """What the servers alone impose before the first sentence can be heard."""
    first_sentence = REPLY.split(". ")[0].split()  # its last token arrives (n - 1) gaps later
    gaps = (len(first_sentence) - 1) / TOKENS_PER_S
    return (FIRST_TOKEN_S + gaps + TTS_FIRST_BYTE_S) * 1000


# ---------------------------------------------------------------- the servers


async def serve() -> None:
    from tests.engine.providers.llm.openai.fake_server import (
        Delay,
        Done,
        FakeOpenAIServer,
        Finish,
        Text,
    )
    from tests.engine.providers.tts.openai.fake_server import FakeOpenAISpeechServer

    class SlowSpeech(FakeOpenAISpeechServer):
        async def _answer(self, reader: Any, writer: Any, request: Any) -> bool:
            await asyncio.sleep(TTS_FIRST_BYTE_S)
            return await super()._answer(reader, writer, request)

    steps: list[Any] = [Delay(FIRST_TOKEN_S)]
    for token in tokens():
        steps += [Text(token), Delay(1 / TOKENS_PER_S)]
    steps += [Finish("stop"), Done()]
    async with FakeOpenAIServer(default=steps) as llm, SlowSpeech(api_key=API_KEY) as tts:
        print(json.dumps({"llm": llm.base_url, "tts": tts.base_url}), flush=True)
        while True:  # requests are recorded by the fakes; a long run must not keep them
            await asyncio.sleep(1)
            llm.requests.clear()
            tts.requests.clear()
            tts.connections.clear()


# ---------------------------------------------------------------- our side


async def ours_session(index: int, turns: int, urls: dict[str, str]) -> list[float]:
    from engine.protocol import Stamped, TtsDoneEvent
    from engine.providers.base import FinalTranscript
    from engine.providers.llm.openai.adapter import OpenAICompatibleLLM
    from engine.providers.tts.openai.adapter import OpenAITTS
    from engine.session import SessionConfig, VoiceSession
    from tests.engine.providers.fake import FakeSTT, FakeToolRunner

    first_audio: list[float] = []
    started = 0.0
    done = asyncio.Event()

    async def emit(event: Stamped) -> None:
        if isinstance(event.event, TtsDoneEvent):
            done.set()

    async def send_audio(chunk: bytes) -> None:
        nonlocal started
        if started:
            first_audio.append((time.monotonic() - started) * 1000)
            started = 0.0

    stt = FakeSTT()
    session = VoiceSession(
        config=SessionConfig(
            session_id=f"bench-{index}", resume_token="-", workspace_id=1, llm_name="openai"
        ),
        llm=OpenAICompatibleLLM(urls["llm"], api_key="sk-bench", model="gpt-4o-mini"),
        tts=OpenAITTS(api_key=API_KEY, base_url=urls["tts"]),
        stt=stt,
        tool_runner=FakeToolRunner(),
        emit=emit,
        send_audio=send_audio,
    )
    await session.start()
    pauses = random.Random(index)
    for _ in range(turns):
        await asyncio.sleep(pauses.uniform(0, GAP_S))
        done.clear()
        started = time.monotonic()
        stt.streams[0].inject(FinalTranscript(QUESTION))
        await done.wait()
        await asyncio.sleep(SETTLE_S)
    await session.close()
    return first_audio


# ---------------------------------------------------------------- Pipecat's side


def quiet_pipecat() -> None:
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING")


async def pipecat_session(index: int, turns: int, urls: dict[str, str]) -> list[float]:
    from pipecat.frames.frames import (
        EndFrame,
        LLMFullResponseEndFrame,
        LLMMessagesAppendFrame,
        TTSAudioRawFrame,
    )
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.runner import PipelineRunner
    from pipecat.pipeline.task import PipelineParams, PipelineTask
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.services.openai.llm import OpenAILLMService
    from pipecat.services.openai.tts import OpenAITTSService

    first_audio: list[float] = []
    state: dict[str, Any] = {"started": 0.0, "ended": asyncio.Event()}

    class Probe(FrameProcessor):
        async def process_frame(self, frame: Any, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TTSAudioRawFrame) and state["started"]:
                first_audio.append((time.monotonic() - state["started"]) * 1000)
                state["started"] = 0.0
            elif isinstance(frame, LLMFullResponseEndFrame):
                state["ended"].set()
            await self.push_frame(frame, direction)

    context = LLMContext()
    aggregators = LLMContextAggregatorPair(context)
    llm = OpenAILLMService(api_key="sk-bench", base_url=urls["llm"], model="gpt-4o-mini")
    tts = OpenAITTSService(api_key=API_KEY, base_url=urls["tts"], voice="alloy",
                           model="gpt-4o-mini-tts", sample_rate=24_000)  # fmt: skip
    pipeline = Pipeline([aggregators.user(), llm, tts, Probe(), aggregators.assistant()])
    task = PipelineTask(
        pipeline,
        params=PipelineParams(audio_out_sample_rate=24_000),
        enable_rtvi=False,
        cancel_on_idle_timeout=False,
        idle_timeout_secs=None,
    )

    async def converse() -> None:
        pauses = random.Random(index)
        await asyncio.sleep(0.5)  # the pipeline starts
        for _ in range(turns):
            await asyncio.sleep(pauses.uniform(0, GAP_S))
            state["ended"].clear()
            state["started"] = time.monotonic()
            message = {"role": "user", "content": QUESTION}
            await task.queue_frame(LLMMessagesAppendFrame([message], run_llm=True))
            await state["ended"].wait()
            await asyncio.sleep(SETTLE_S)  # the last sentence is spoken
        await task.queue_frame(EndFrame())

    runner = PipelineRunner(handle_sigint=False)
    await asyncio.gather(runner.run(task), converse())
    return first_audio


# ---------------------------------------------------------------- one side, in its process


async def run_side(side: str, sessions: int, turns: int, urls: dict[str, str]) -> dict[str, Any]:
    if side == "pipecat":
        quiet_pipecat()
    make = pipecat_session if side == "pipecat" else ours_session
    await make(10_000, 1, urls)  # warm-up: imports, first connections
    cpu, began = time.process_time(), time.monotonic()
    results = await asyncio.gather(*(make(i, turns, urls) for i in range(sessions)))
    return {
        "side": side,
        "sessions": sessions,
        "first_audio_ms": [value for result in results for value in result],
        "cpu_s": time.process_time() - cpu,
        "wall_s": time.monotonic() - began,
        "turns": sessions * turns,
    }


def child(python: str, side: str, sessions: int, turns: int, urls: dict[str, str]) -> Any:
    done = subprocess.run(
        [python, __file__, "--side", side, "--sessions", str(sessions), "--turns", str(turns),
         "--urls", json.dumps(urls)],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{side} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- the comparison


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def p50_p90(values: list[float]) -> dict[str, float]:
    return {"p50": round(quantile(values, 0.5), 1), "p90": round(quantile(values, 0.9), 1)}


def side_report(result: dict[str, Any]) -> dict[str, Any]:
    audio = result["first_audio_ms"]
    overhead = [value - floor_ms() for value in audio]
    return {
        "turns": len(audio),
        "first_audio_ms": p50_p90(audio),
        "overhead_ms": p50_p90(overhead),
        "cpu_ms_per_turn": round(1000 * result["cpu_s"] / max(1, result["turns"]), 2),
    }


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b > 0 else None


def compare(python: str, sessions: list[int], turns: int) -> dict[str, Any]:
    servers = subprocess.Popen(
        [sys.executable, __file__, "--serve"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert servers.stdout is not None
        urls = json.loads(servers.stdout.readline())
        runs = []
        for n in sessions:
            ours = side_report(child(sys.executable, "ours", n, turns, urls))
            theirs = side_report(child(python, "pipecat", n, turns, urls))
            runs.append({
                "sessions": n,
                "ours": ours,
                "pipecat": theirs,
                "ratio_ours_to_pipecat": {
                    "first_audio_p50": ratio(ours["first_audio_ms"]["p50"],
                                             theirs["first_audio_ms"]["p50"]),
                    "overhead_p50": ratio(ours["overhead_ms"]["p50"],
                                          theirs["overhead_ms"]["p50"]),
                    "cpu_per_turn": ratio(ours["cpu_ms_per_turn"], theirs["cpu_ms_per_turn"]),
                },
            })  # fmt: skip
            print(f"vs_pipecat: {n} sessions done", file=sys.stderr)
    finally:
        servers.terminate()
        servers.wait(timeout=10)
    return {
        "benchmark": "vs_pipecat",
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, "
        f"python {platform.python_version()}",
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "pipecat": pipecat_version(python),
        "servers": f"LLM {FIRST_TOKEN_S * 1000:g} ms to first token, {TOKENS_PER_S} tokens/s, "
        f"{len(tokens())} tokens in 3 sentences; TTS {TTS_FIRST_BYTE_S * 1000:g} ms to "
        "first byte",
        "floor_ms": round(floor_ms(), 1),
        "turns_per_session": turns,
        "runs": runs,
    }


def pipecat_version(python: str) -> str:
    done = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('pipecat-ai'))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def table(result: dict[str, Any]) -> str:
    lines = [
        f"floor {result['floor_ms']} ms; load average {result['load_average']}",
        "sessions  side     first audio p50/p90 ms  overhead p50 ms  CPU ms/turn",
    ]
    for run in result["runs"]:
        for side in ("ours", "pipecat"):
            figures = run[side]
            audio, overhead = figures["first_audio_ms"], figures["overhead_ms"]
            lines.append(
                f"{run['sessions']:>8}  {side:<8}{audio['p50']:>11}/{audio['p90']:<12}"
                f"{overhead['p50']:>15}{figures['cpu_ms_per_turn']:>13}"
            )
        r = run["ratio_ours_to_pipecat"]
        lines.append(f"{'':>8}  ours/pipecat: first audio {r['first_audio_p50']}, "
                     f"overhead {r['overhead_p50']}, CPU per turn {r['cpu_per_turn']}")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="1,50")
    parser.add_argument("--turns", type=int, default=10, help="per session")
    parser.add_argument("--pipecat-python", default=str(ROOT / ".venv-pipecat" / "bin" / "python"))
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--side", choices=("ours", "pipecat"), help=argparse.SUPPRESS)
    parser.add_argument("--urls", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve())
    elif args.side:
        counts = int(args.sessions)
        urls = json.loads(args.urls)
        print(json.dumps(asyncio.run(run_side(args.side, counts, args.turns, urls))))
    else:
        if not Path(args.pipecat_python).exists():
            sys.exit(
                "Pipecat is needed, in a venv of its own:\n  python3 -m venv .venv-pipecat && "
                ".venv-pipecat/bin/pip install -r requirements/bench.txt"
            )
        counts = [int(n) for n in args.sessions.split(",") if n.strip()]
        outcome = compare(args.pipecat_python, counts, args.turns)
        print(json.dumps(outcome, indent=1))
        print()
        print(table(outcome))
