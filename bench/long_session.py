"""A long session: what each turn writes to Redis, and what it costs the turn.

Sessions of 100 voice turns (default) with instant fakes (STT, an LLM that calls one
server tool every turn and then answers, TTS), each hosted as in production by a
``SessionHost`` that keeps the session resumable in Redis (events and state, see
``realtime/resume``). Counted per turn: the bytes this process sent to Redis (every
command, measured at the connection, so any store layout is measured the same way), the
CPU time this process spent on the turn (fakes included: its growth is what the session's
length costs), and the platform's overhead (final transcript -> LLM request, plus first
LLM text -> first TTS request, from the turn's own metrics). The record is not written
(no database).

Prints one JSON object: bytes and CPU per turn at turns 10, 50 and 100 (mean over
sessions) and p50/p99 of the per-turn overhead. A measurement, not a test: there are no
thresholds.

    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python bench/long_session.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
if not os.environ.get("REDIS_URL"):
    sys.exit("REDIS_URL must be set: the benchmark measures what is written to Redis")

import django

django.setup()

import redis.asyncio.connection as redis_connection  # noqa: E402

from engine.protocol import Stamped, TtsDoneEvent  # noqa: E402
from engine.providers.base import FinalTranscript  # noqa: E402
from engine.session import SessionConfig, ToolDefinition, VoiceSession  # noqa: E402
from engine.session.config import TurnMetrics  # noqa: E402
from realtime.resume import SessionHost  # noqa: E402
from tests.engine.providers.fake import FakeLLM, FakeSTT, FakeToolRunner, FakeTTS, tool_call  # noqa: E402

ASKED = "what is the weather in Paris tomorrow, and should I take an umbrella with me"
REPLY = ["It will be mild and dry ", "in Paris tomorrow, around 18 degrees. ", "No umbrella."]
REPORTED_TURNS = (10, 50, 100)

sent_bytes = 0


def count_sent_bytes() -> None:
    """Count every byte this process sends to Redis."""
    send = redis_connection.AbstractConnection.send_packed_command

    async def counted(self: Any, command: Any, check_health: bool = True) -> None:
        global sent_bytes
        if isinstance(command, bytes | str):
            sent_bytes += len(command)
            return await send(self, command, check_health)
        chunks = list(command)
        sent_bytes += sum(len(chunk) for chunk in chunks)
        return await send(self, chunks, check_health)

    redis_connection.AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]


class NoRecord:
    """The session record is the database's business, not this benchmark's."""

    on_quota_exceeded: Any = None

    def observe(self, event: dict[str, Any]) -> None: ...

    def tool_settled(self, call: Any) -> None: ...

    def record_usage(self, usage: dict[str, int], *, ended: bool = False) -> None: ...

    async def pause(self) -> None: ...

    async def finish(self, close_code: int | None, usage: Any = None) -> None: ...


class ScriptedLLM(FakeLLM):
    """FakeLLM without its deep copy of every request (a test's record of what was sent,
    which grows with the history: not a cost of the platform)."""

    async def stream(self, *, messages: Any, tools: Any, model: str | None = None) -> Any:
        async for event in super().stream(messages=[], tools=tools, model=model):
            yield event


def script(turns: int) -> list[Any]:
    rounds: list[Any] = []
    for turn in range(1, turns + 1):
        rounds.append([tool_call("forecast", {"city": "Paris", "day": turn}, id=f"c{turn}")])
        rounds.append(REPLY)
    return rounds


async def run_session(index: int, turns: int) -> tuple[list[int], list[float], list[float]]:
    """Bytes sent to Redis and CPU ms during each turn (this session alone runs), and the
    turns' overheads."""
    metrics: list[TurnMetrics] = []
    spoken = asyncio.Event()
    session_id = f"{int(time.time() * 1000):x}{index:04x}".ljust(32, "0")
    host = SessionHost(
        session_id=session_id, workspace_id=1, channel="", recorder=NoRecord(),  # type: ignore[arg-type]
        lease_pools=(),
    )  # fmt: skip

    async def emit(event: Stamped) -> None:
        await host.emit(event)
        if isinstance(event.event, TtsDoneEvent):
            spoken.set()

    forecast = ToolDefinition(
        name="forecast",
        description="The weather forecast for a city",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
        handler="async (args) => ({ sky: 'clear' })",
    )
    runner = FakeToolRunner(handlers={"forecast": lambda args: {"sky": "clear", "c": 18}})
    stt = FakeSTT()
    session = VoiceSession(
        config=SessionConfig(
            session_id=session_id,
            resume_token="-",
            workspace_id=1,
            llm_name="fake",
            instructions="You are a weather assistant for {{city}}.",
            variables={"city": "Paris"},
            tools=[forecast],
        ),
        llm=ScriptedLLM(script=script(turns)),
        tool_runner=runner,
        emit=emit,
        send_audio=host.send_audio,
        stt=stt,
        tts=FakeTTS(ms_per_char=0),
        on_turn_metrics=metrics.append,
    )
    await host.begin(session, tool_runner=runner, meta={"bench": True})
    await session.start()
    per_turn: list[int] = []
    cpu_ms: list[float] = []
    try:
        for _ in range(turns):
            await host.flush()
            before, cpu_before = sent_bytes, time.process_time()
            spoken.clear()
            stt.streams[0].inject(FinalTranscript(ASKED))
            await spoken.wait()
            await session.current_turn_done(5)
            await host.flush()
            per_turn.append(sent_bytes - before)
            cpu_ms.append((time.process_time() - cpu_before) * 1000)
    finally:
        await host.end(1000)
    overheads = [
        (m.input_to_llm_ms or 0.0) + (m.llm_text_to_tts_ms or 0.0)
        for m in metrics
        if m.outcome == "completed" and m.input_to_llm_ms is not None
    ]
    return per_turn, cpu_ms, overheads


def percentiles(values: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": round(statistics.median(values), 3), "p99": round(cuts[98], 3)}


async def main(turns: int, sessions: int) -> dict[str, Any]:
    count_sent_bytes()
    await run_session(9999, 3)  # warm-up: imports, the Redis connection
    bytes_by_turn: list[list[int]] = []
    cpu_by_turn: list[list[float]] = []
    overheads: list[float] = []
    began = time.perf_counter()
    for index in range(sessions):
        per_turn, cpu_ms, overhead = await run_session(index, turns)
        bytes_by_turn.append(per_turn)
        cpu_by_turn.append(cpu_ms)
        overheads.extend(overhead)
    elapsed = time.perf_counter() - began
    reported = [t for t in REPORTED_TURNS if t <= turns] or [turns]
    return {
        "benchmark": "long_session",
        "turns": turns,
        "sessions": sessions,
        "python": platform.python_version(),
        "redis_bytes_per_turn": {
            str(t): round(statistics.mean(run[t - 1] for run in bytes_by_turn)) for t in reported
        },
        "redis_bytes_total_per_session": round(statistics.mean(sum(r) for r in bytes_by_turn)),
        "cpu_ms_per_turn": {
            str(t): round(statistics.mean(run[t - 1] for run in cpu_by_turn), 2) for t in reported
        },
        "overhead_per_turn_ms": percentiles(overheads),
        "wall_s": round(elapsed, 2),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100, help="turns per session (100)")
    parser.add_argument("--sessions", type=int, default=5, help="sessions, one after another")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(max(2, args.turns), max(1, args.sessions)))))
