"""What a trivial server tool call costs, against the floor, in one run. Prints JSON.

- floor: a bare V8 context (mini-racer) created and a trivial expression evaluated in this
  process: what any design that runs a handler in a fresh context pays at least;
- embedded: the platform's default path, a session's tool runner handing the call to this
  process's pool of jailed worker processes (secrets query, worker round trip, outcome);
- celery (with REDIS_URL): through Redis and a real Celery worker (one task process): the
  workspace's slot, the queue, the task process and its jailed worker, the outcome back on
  the session's channel; at 1 and 50 concurrent sessions, plus calls per second.

Each session makes its calls one after another, with a short pause between them as a
conversation has (a call right after the previous one shares the worker with the
preparation of its next context). Ratios are to the floor measured in the same run.

    .venv/bin/python bench/tool_call.py [--calls 100]
    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python bench/tool_call.py

Uses DATABASE_URL if set (else the embedded SQLite file, shared with the worker).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
PAUSE_S = 0.02  # between two calls of one session


def _setup() -> int:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from secrets_app import services

    user, _ = services.user_get_or_create(email="bench@example.com")
    return services.workspace_create(name="bench", owner=user).pk


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50": round(statistics.median(ordered), 2), "p99": round(pick(0.99), 2)}


def _floor(calls: int) -> dict[str, float]:
    from py_mini_racer import MiniRacer

    times = []
    for _ in range(calls):
        started = time.perf_counter()
        context = MiniRacer()
        context.eval("(() => ({ n: 1 }))().n")
        times.append((time.perf_counter() - started) * 1000)
        context.close()
        time.sleep(PAUSE_S)
    return _percentiles(times)


def _invocation(workspace_id: int, session: str, index: int) -> Any:
    from engine.tools.call import ToolRequest

    return ToolRequest(
        call_id=f"{session}-{index}", session_id=session, workspace_id=workspace_id,
        name="echo", handler="(args) => ({ n: args.n })", arguments={"n": index},
        timeout_s=10, pinned=False,
    )  # fmt: skip


async def _calls(run: Callable[[Any], Awaitable[Any]], make: Callable[[int], Any], calls: int,
                 latencies: list[float]) -> None:  # fmt: skip
    for index in range(calls):
        started = time.perf_counter()
        outcome = await run(make(index))
        latencies.append((time.perf_counter() - started) * 1000)
        assert outcome.status == "completed", outcome
        await asyncio.sleep(PAUSE_S)


async def _embedded(workspace_id: int, calls: int) -> dict[str, Any]:
    from django.conf import settings

    from tools_app.runner import SandboxToolRunner

    settings.CELERY_TASK_ALWAYS_EAGER = True
    runner = SandboxToolRunner()
    warm: list[float] = []
    await _calls(runner.run, lambda i: _invocation(workspace_id, "warm", i), 5, warm)
    latencies: list[float] = []
    await _calls(runner.run, lambda i: _invocation(workspace_id, "embedded", i), calls, latencies)
    return {"sessions": 1, "calls": len(latencies), "ms": _percentiles(latencies)}


def _start_worker(log: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "platform_site", "worker", "-Q", "sandbox",
         "-c", "1", "-l", "INFO", "--without-mingle", "--without-gossip"],
        cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while "sandbox worker protections" not in log.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("worker did not start:\n" + log.read_text()[-2000:])
        time.sleep(0.2)
    return process


async def _celery_session(workspace_id: int, calls: int, latencies: list[float]) -> None:
    from tests.tools_app.jailed import session_runner

    async with session_runner() as runner:
        session = f"s{id(runner)}"
        make = lambda i: _invocation(workspace_id, session, i)  # noqa: E731
        await _calls(runner.run, make, calls, latencies)


async def _celery(workspace_id: int, sessions: int, calls: int) -> dict[str, Any]:
    from django.conf import settings

    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.SANDBOX_WORKSPACE_CONCURRENCY = sessions  # one workspace: no slot waits here
    latencies: list[float] = []
    started = time.perf_counter()
    await asyncio.gather(
        *(_celery_session(workspace_id, calls, latencies) for _ in range(sessions))
    )
    wall = time.perf_counter() - started
    return {
        "sessions": sessions,
        "calls": len(latencies),
        "ms": _percentiles(latencies),
        "calls_per_s_one_worker_process": round(len(latencies) / wall, 1),
    }


def _ratios(result: dict[str, Any], floor: dict[str, float]) -> dict[str, Any]:
    ms = result["ms"]
    return {**result, "ratio_to_floor": {q: round(ms[q] / floor[q], 2) for q in ("p50", "p99")}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100, help="calls per session")
    options = parser.parse_args()
    workspace_id = _setup()
    floor = _floor(options.calls)
    results: dict[str, Any] = {"floor_ms": floor}
    results["embedded"] = _ratios(asyncio.run(_embedded(workspace_id, options.calls)), floor)
    if os.environ.get("REDIS_URL"):
        log = Path(tempfile.mkdtemp()) / "worker.log"
        worker = _start_worker(log)
        try:
            asyncio.run(_celery(workspace_id, 1, 3))  # the task process and its worker warm up
            results["celery"] = [
                _ratios(asyncio.run(_celery(workspace_id, n, calls)), floor)
                for n, calls in ((1, options.calls), (50, max(5, options.calls // 10)))
            ]
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=30)
    print(json.dumps({"benchmark": "tool_call", "handler": "trivial", **results}, indent=1))


if __name__ == "__main__":
    main()
