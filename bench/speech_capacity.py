"""Offline speech capacity: voice to voice and CPU per turn at 1, 2, 4, 8 talkers (issue 27).

One daphne web process on the embedded defaults (the offline engine: Silero VAD, smart-turn,
faster-whisper tiny.en, Piper ``joe``), pinned to one CPU (``--web-cpu``, default 0), with
the fake OpenAI-compatible LLM of ``bench/load.py`` (instant; it answers "You said: ..."),
started and torn down by ``bench/load_stack.Stack`` (its own Postgres database, one Redis
database number). For each N, N WebSocket sessions speak at the same moment: each a different
sentence of ``bench/voice_to_voice.py``, spoken by Piper (or espeak-ng), 0.3 s of silence
before, 20 ms frames in real time, then silence until the agent's reply is over. ``--rounds``
such rounds per N, in the same sessions.

Per N: voice to voice p50/p90 (the client's clock: the frame holding the recording's last
loud sample sent -> the first audio frame back), the web process's CPU seconds per turn
(utime+stime from /proc over the rounds, listening included, / turns), the machine's load
average at the end, and where the web process's CPU went, per thread (/proc/<pid>/task),
named from ``py-spy dump`` (Python threads: the event loop, Whisper final, Whisper partials,
the end-of-turn model, Piper); threads py-spy does not know are native pools
(CTranslate2's Whisper workers, ONNX Runtime's). Prints one JSON object, then a table.
A measurement, not a test.

    .venv/bin/python bench/speech_capacity.py [--talkers 1,2,4,8] [--rounds 3]
        [--voice piper|espeak-ng] [--web-cpu 0] [--redis-db 7]

Environment: ``BENCH_REDIS_URL``, ``BENCH_POSTGRES_URL`` as in ``bench/load.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.load import percentiles
from bench.load_clients import ClientSession, Observations, Plan
from bench.load_stack import Child, Stack, cpu_seconds, thread_cpu_seconds
from bench.voice_to_voice import FRAME, SENTENCES, last_word_frame, recording, speak

FRAME_S = 0.02
REPLY_TIMEOUT_S = 30.0
THREADS = {  # thread name prefix -> what runs there
    "MainThread": "event loop",
    "local-stt-final": "Whisper final",
    "local-stt-partial": "Whisper partials",
    "local-turn": "end-of-turn model",
    "local-tts": "Piper",
}
NATIVE = "native, other"
POOLS = {"ctranslate2": "CTranslate2 (Whisper)", "onnxruntime": "ONNX Runtime pool"}
_GDB_THREAD = re.compile(r"Thread \d+ \(Thread 0x[0-9a-f]+ \(LWP (\d+)\)")
_DUMP_THREAD = re.compile(r'^Thread (\d+) \([^)]*\): "([^"]+)"', re.MULTILINE)


@dataclass
class OfflineStack(Stack):
    """The load benchmark's stack with the offline recogniser and voice (the defaults)."""

    def env(self) -> dict[str, str]:
        return {**super().env(), "STT_PROVIDER": "local", "TTS_PROVIDER": "local"}


@dataclass(frozen=True)
class Utterance:
    pcm: bytes
    last_word_frame: int


async def utterances(voice: str, count: int) -> list[Utterance]:
    with tempfile.TemporaryDirectory() as name:
        made = [recording(await speak(voice, text, Path(name))) for text in SENTENCES[:count]]
    return [Utterance(pcm, last_word_frame(pcm)) for pcm in made]


# ---------------------------------------------------------------- one talker


async def talk(client: ClientSession, seen: Observations, said: Utterance) -> None:
    """Stream ``said`` in real time, then silence until the turn's ``metrics`` arrive."""
    assert client.ws is not None
    loop = asyncio.get_running_loop()
    replies, silence = len(seen.server_metrics), bytes(FRAME)
    began, frame = loop.time(), 0
    while len(seen.server_metrics) == replies and loop.time() - began < REPLY_TIMEOUT_S:
        start = frame * FRAME
        await client.ws.send(said.pcm[start : start + FRAME] if start < len(said.pcm) else silence)
        if frame == said.last_word_frame:
            client.speech_ended()
        frame += 1
        await asyncio.sleep(max(0.0, began + frame * FRAME_S - loop.time()))


# ---------------------------------------------------------------- the web process's threads


def thread_names(pid: int) -> dict[int, str]:
    """Python threads of ``pid`` by OS thread id, from ``py-spy dump`` (empty without it)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    try:
        dump = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True,
                              timeout=30).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {int(tid): name for tid, name in _DUMP_THREAD.findall(dump)}


def native_owners(pid: int) -> dict[int, str]:
    """Threads py-spy does not know (native pools), by OS thread id, named from the
    libraries on their stacks (``gdb``; empty without it)."""
    try:
        dump = subprocess.run(["gdb", "-batch", "-p", str(pid), "-ex", "thread apply all bt"],
                              capture_output=True, text=True, timeout=120).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return {}
    owners = {}
    for block in re.split(r"\n(?=Thread \d+ )", dump):
        if found := _GDB_THREAD.match(block):
            library = next((who for key, who in POOLS.items() if key in block), None)
            owners[int(found.group(1))] = f"native: {library}" if library else NATIVE
    return owners


def by_thread(
    before: dict[int, float],
    after: dict[int, float],
    names: dict[int, str],
    native: dict[int, str],
    turns: int,
) -> dict[str, float]:
    """CPU milliseconds per turn of each kind of thread, largest first."""
    spent: dict[str, float] = defaultdict(float)
    for tid, seconds in after.items():
        name = names.get(tid)
        label = native.get(tid, NATIVE) if name is None else next(
            (what for prefix, what in THREADS.items() if name.startswith(prefix)), "other Python"
        )  # fmt: skip
        spent[label] += seconds - before.get(tid, 0.0)
    ordered = sorted(spent.items(), key=lambda item: -item[1])
    return {label: round(1000 * seconds / turns, 1) for label, seconds in ordered if seconds}


# ---------------------------------------------------------------- one N


async def measure(
    web: Child, plan: Plan, talkers: int, rounds: int, said: list[Utterance]
) -> dict[str, Any]:
    sessions = [(ClientSession(index=i, of=talkers, port=web.port or 0, plan=plan,
                               seen=(seen := Observations())), seen)
                for i in range(talkers)]  # fmt: skip
    try:
        await asyncio.gather(*(client.open(stream=False) for client, _ in sessions))
        threads_before, cpu_before = thread_cpu_seconds(web.pid), cpu_seconds(web.pid)
        began = time.monotonic()
        for round_ in range(rounds):
            await asyncio.gather(*(
                talk(client, seen, said[(index + round_) % len(said)])
                for index, (client, seen) in enumerate(sessions)
            ))  # fmt: skip
        wall, cpu = time.monotonic() - began, cpu_seconds(web.pid) - cpu_before
        threads_after, load_average = thread_cpu_seconds(web.pid), os.getloadavg()
    finally:
        await asyncio.gather(*(client.close() for client, _ in sessions), return_exceptions=True)
    turns = talkers * rounds
    answered = [ms for _, seen in sessions for _, ms in seen.speech_end_to_audio_ms]
    return {
        "talkers": talkers,
        "turns": turns,
        "answered": len(answered),
        "voice_to_voice_ms": percentiles(answered),
        "web_cpu_s_per_turn": round(cpu / turns, 3),
        "web_cpu_pct": round(100 * cpu / wall, 1),
        "load_average": [round(x, 2) for x in load_average],
        "cpu_ms_per_turn_by_thread": by_thread(
            threads_before, threads_after, thread_names(web.pid), native_owners(web.pid), turns
        ),
        "errors": dict(sum((seen.errors for _, seen in sessions), Counter())),
    }


async def benchmark(stack: Stack, options: argparse.Namespace) -> dict[str, Any]:
    said = await utterances(options.voice, min(len(SENTENCES), max(options.talkers) + 2))
    await asyncio.to_thread(stack.prepare)
    plan = Plan(stack.publishable_key, turn_every_s=0, server_tool=False)
    (web,) = await asyncio.to_thread(stack.start_web, 1)
    await measure(web, plan, 1, 1, said)  # warm: the first turn pays for lazy loads
    runs = []
    for talkers in options.talkers:
        runs.append(await measure(web, plan, talkers, options.rounds, said))
        print(f"speech_capacity: {talkers} talkers done", file=sys.stderr)
    return {
        "benchmark": "speech_capacity",
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, "
        f"python {platform.python_version()}",
        "settings": {
            "web_cpu": options.web_cpu,
            "rounds": options.rounds,
            "voice": options.voice,
            "frame_ms": 20,
        },
        "runs": runs,
        "web_log_problems": web.problems()[:5],
    }


def table(result: dict[str, Any]) -> str:
    lines = ["talkers  v2v p50/p90 ms  CPU s/turn  web CPU %  load avg (1 min)  top threads"]
    for run in result["runs"]:
        v2v = run["voice_to_voice_ms"] or {"p50": float("nan"), "p90": float("nan")}
        threads = list(run["cpu_ms_per_turn_by_thread"].items())[:4]
        top = ", ".join(f"{name} {ms:.0f}" for name, ms in threads)
        lines.append(
            f"{run['talkers']:>7}  {v2v['p50']:>6.0f}/{v2v['p90']:<6.0f}"
            f"{run['web_cpu_s_per_turn']:>11.3f}{run['web_cpu_pct']:>11}"
            f"{run['load_average'][0]:>18}  {top} (ms/turn)"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--talkers", type=lambda text: [int(n) for n in text.split(",") if n],
                        default=[1, 2, 4, 8])  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="turns per talker and N")
    parser.add_argument("--voice", choices=["piper", "espeak-ng"], default="piper")
    parser.add_argument("--web-cpu", type=int, default=0, help="the daphne process's CPU")
    parser.add_argument("--redis-db", type=int, default=7, help="flushed before and after")
    return parser.parse_args(argv)


async def main(options: argparse.Namespace) -> dict[str, Any]:
    others = set(range(os.cpu_count() or 1)) - {options.web_cpu}
    if others:  # the talkers and the fake LLM off the web process's CPU
        os.sched_setaffinity(0, others)
    stack = OfflineStack(
        web_cpu=options.web_cpu,
        redis_url_base=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379"),
        redis_db=options.redis_db,
        postgres_url=os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432"),
    )
    with stack.running():
        return await benchmark(stack, options)


if __name__ == "__main__":
    outcome = asyncio.run(main(parse_args()))
    print(json.dumps(outcome, indent=1))
    print()
    print(table(outcome))
