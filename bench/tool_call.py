"""Tool-call overhead through real Redis and a real Celery worker.

Measures, for a trivial handler, the time from "the session hands the call to its
tool runner" to "the outcome is back in the session", at 1 and 50 concurrent
sessions, and the calls per second one worker process sustains. Prints JSON.

    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python bench/tool_call.py [--calls 20]

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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")


def _setup() -> int:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from secrets_app import services

    user, _ = services.user_get_or_create(email="bench@example.com")
    return services.workspace_create(name="bench", owner=user).pk


def _start_worker(log: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "platform_site", "worker", "-Q", "sandbox",
         "-c", "1", "-l", "INFO", "--without-mingle", "--without-gossip"],
        cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while "ready." not in log.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("worker did not start:\n" + log.read_text()[-2000:])
        time.sleep(0.2)
    return process


async def _session(workspace_id: int, calls: int, latencies: list[float]) -> None:
    from channels.layers import get_channel_layer

    from sessions_app.providers.base import ToolInvocation
    from tools_app.runner import SandboxToolRunner

    layer = get_channel_layer()
    channel = await layer.new_channel()
    runner = SandboxToolRunner(reply_channel=channel)

    async def pump() -> None:
        while True:
            runner.resolve(await layer.receive(channel))

    pumping = asyncio.create_task(pump())
    try:
        for index in range(calls):
            invocation = ToolInvocation(
                call_id=f"{channel}-{index}", session_id=channel, workspace_id=workspace_id,
                name="echo", handler="(args) => ({ n: args.n })", arguments={"n": index},
                timeout_s=10, pinned=False,
            )  # fmt: skip
            started = time.perf_counter()
            outcome = await runner.run(invocation)
            latencies.append((time.perf_counter() - started) * 1000)
            assert outcome.status == "completed", outcome
    finally:
        pumping.cancel()


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50": round(statistics.median(ordered), 2), "p99": round(pick(0.99), 2)}


async def _measure(workspace_id: int, sessions: int, calls: int) -> dict[str, object]:
    latencies: list[float] = []
    started = time.perf_counter()
    await asyncio.gather(*(_session(workspace_id, calls, latencies) for _ in range(sessions)))
    wall = time.perf_counter() - started
    return {
        "sessions": sessions,
        "calls": len(latencies),
        "overhead_ms": _percentiles(latencies),
        "calls_per_s_one_worker_process": round(len(latencies) / wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20, help="calls per session")
    options = parser.parse_args()
    if not os.environ.get("REDIS_URL"):
        raise SystemExit("set REDIS_URL: this benchmark goes through Redis and a real worker")
    workspace_id = _setup()
    log = Path(tempfile.mkdtemp()) / "worker.log"
    worker = _start_worker(log)
    try:
        asyncio.run(_measure(workspace_id, 1, 3))  # warm the worker's child
        results = [asyncio.run(_measure(workspace_id, n, options.calls)) for n in (1, 50)]
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
    print(json.dumps({"benchmark": "tool_call", "handler": "trivial", "results": results}))


if __name__ == "__main__":
    main()
