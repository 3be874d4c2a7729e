"""Platform overhead per voice turn, with instant fake providers.

Measures, at 1 and at 100 concurrent sessions on one event loop:

(a) final transcript received -> LLM request sent
(b) first LLM text -> first TTS request (sentence splitting, cleaning, speech queue)

"burst": every session's next turn starts the moment its last one ends, so with 100
sessions the figures are mostly event-loop queueing (the worst case for one process).
"paced": each turn starts after a random 0-50 ms pause, as users do not talk in lockstep.
"hosted": each session also runs in a ``SessionHost`` as in production, which keeps it
resumable (events and state snapshots to the in-memory resume store, on the same loop),
so what the host does per event shows in the turns of every session of the process.
``cpu_ms_per_turn``: this process's CPU time over the turns (hosted minus bare: the host's
share), steadier than latencies on a busy machine.

Prints one JSON object. A measurement, not a test: there are no thresholds.

    .venv/bin/python bench/turn_overhead.py [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.protocol import Stamped, TtsDoneEvent
from engine.providers.base import FinalTranscript
from engine.session import SessionConfig, TurnMetrics, VoiceSession
from tests.engine.providers.fake import FakeLLM, FakeSTT, FakeToolRunner, FakeTTS

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")

REPLY = ["Sure thing. ", "It is sunny ", "and warm in Paris today. ", "Anything else?"]
CONCURRENCY = (1, 100)
PACE_S = 0.05


class NoRecord:
    """The session record is the database's business, not this benchmark's."""

    on_quota_exceeded: Any = None

    def observe(self, event: dict[str, Any]) -> None: ...

    async def finish(self, close_code: int | None, usage: Any = None) -> None: ...


def new_host(index: int) -> Any:
    from engine.resume.store import MemoryResumeStore
    from realtime.resume import SessionHost

    return SessionHost(
        session_id=f"{index:032x}", workspace_id=1, channel="", recorder=NoRecord(),  # type: ignore[arg-type]
        store=MemoryResumeStore(), lease_pools=("bench",),
    )  # fmt: skip


async def run_session(
    index: int, turns: int, pace_s: float, metrics: list[TurnMetrics], hosted: bool = False
) -> None:
    pauses = random.Random(index)
    spoken = asyncio.Event()
    host = new_host(index) if hosted else None

    async def emit(event: Stamped) -> None:
        if host is not None:
            await host.emit(event)
        if isinstance(event.event, TtsDoneEvent):
            spoken.set()

    async def send_audio(chunk: bytes) -> None:
        return None

    stt = FakeSTT()
    session = VoiceSession(
        config=SessionConfig(
            session_id=f"bench-{index}",
            resume_token="-",
            workspace_id=1,
            llm_name="fake",
            instructions="You are a weather assistant for {{city}}.",
            variables={"city": "Paris"},
        ),
        llm=FakeLLM(script=[REPLY] * turns),
        tool_runner=FakeToolRunner(),
        emit=emit,
        send_audio=send_audio,
        stt=stt,
        tts=FakeTTS(ms_per_char=1),
        on_turn_metrics=metrics.append,
    )
    if host is not None:
        await host.begin(session, tool_runner=None, meta={})
    await session.start()
    try:
        for _ in range(turns):
            if pace_s:
                await asyncio.sleep(pauses.uniform(0, pace_s))
            spoken.clear()
            stt.streams[0].inject(FinalTranscript("what is the weather in Paris"))
            await spoken.wait()
    finally:
        if host is not None:
            await host.end(1000)
        else:
            await session.close()


def percentiles(values: list[float]) -> dict[str, float]:
    if len(values) < 2:
        return {"p50": round(values[0], 4), "p99": round(values[0], 4)} if values else {}
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": round(statistics.median(values), 4), "p99": round(cuts[98], 4)}


async def measure(sessions: int, turns: int, pacing: str, hosted: bool = False) -> dict[str, Any]:
    metrics: list[TurnMetrics] = []
    pace_s = PACE_S if pacing == "paced" else 0.0
    began, cpu_began = time.perf_counter(), time.process_time()
    await asyncio.gather(*(run_session(i, turns, pace_s, metrics, hosted) for i in range(sessions)))
    elapsed, cpu_s = time.perf_counter() - began, time.process_time() - cpu_began
    completed = [m for m in metrics if m.outcome == "completed"]
    to_llm = [m.input_to_llm_ms for m in completed if m.input_to_llm_ms is not None]
    to_tts = [m.llm_text_to_tts_ms for m in completed if m.llm_text_to_tts_ms is not None]
    return {
        "sessions": sessions,
        "pacing": pacing,
        "hosted": hosted,
        "turns": len(completed),
        "a_transcript_to_llm_request_ms": percentiles(to_llm),
        "b_first_llm_text_to_first_tts_request_ms": percentiles(to_tts),
        "wall_s": round(elapsed, 3),
        "cpu_ms_per_turn": round(cpu_s * 1000 / max(1, len(metrics)), 3),
    }


async def main(turns: int) -> dict[str, Any]:
    import django

    django.setup()  # for the hosted runs
    await measure(1, 3, "burst")  # warm-up: imports, caches
    await measure(1, 3, "burst", hosted=True)
    return {
        "benchmark": "turn_overhead",
        "turns_per_session": turns,
        "python": platform.python_version(),
        "results": [
            await measure(sessions, turns, pacing, hosted)
            for hosted in (False, True)
            for sessions in CONCURRENCY
            for pacing in ("burst", "paced")
        ],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="turns per session (default 20)")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(max(1, args.turns)))))
