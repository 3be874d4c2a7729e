"""Run a handler the production way from a test: in a pool of jailed worker processes whose
parent is the test process (``tools_app.pool``), with a fetcher the test provides."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from tools_app import pool
from tools_app.calls import SandboxLimits, SandboxResult

TEST_POOL = pool.PoolConfig(size=4, per_lane=4, memory_bytes=768 * 1024 * 1024)


async def _no_fetch(request: dict[str, Any]) -> dict[str, Any]:
    raise pool.FetchDenied("this test serves no fetches")


async def run_jailed(
    source: str,
    args: dict[str, Any] | None = None,
    *,
    fetcher: Any = None,
    secrets: dict[str, str] | None = None,
    lane: int = 1,
    **limits: Any,
) -> SandboxResult:
    async def call() -> SandboxResult:
        return await pool.pool("tests", TEST_POOL).run(
            lane,
            source=source,
            args_json=json.dumps(args or {}),
            secrets_json=json.dumps(secrets or {}),
            limits=SandboxLimits(**limits),
            fetcher=fetcher or _no_fetch,
        )

    return await pool.run_on_pool_loop(call())


async def worker_pids() -> set[int]:
    """The test pool's idle workers."""

    async def pids() -> set[int]:
        tests = pool.pool("tests", TEST_POOL)
        return {worker.pid for worker in tests._idle if worker.pid is not None}

    return await pool.run_on_pool_loop(pids())


BUSY_LOOP = "() => { while (true) {} }"


async def _p99(calm: Callable[[int], Awaitable[str | None]]) -> float:
    latencies = []
    for n in range(1, 41):
        started = time.perf_counter()
        assert await calm(n) == str(n)
        latencies.append(time.perf_counter() - started)
    latencies.sort()
    return latencies[int(len(latencies) * 0.99) - 1]


async def p99_beside_busy_loops(
    *, busy: Callable[[int], Awaitable[Any]], calm: Callable[[int], Awaitable[str | None]],
    loops: int, settle_s: float,
) -> float:  # fmt: skip
    """Start ``loops`` busy calls of one workspace, then time 40 trivial calls of another
    (``calm(n)`` must answer ``str(n)``); the p99 in seconds, measured while every busy
    call was still running or waiting."""
    running = [asyncio.create_task(busy(n)) for n in range(loops)]
    try:
        await asyncio.sleep(settle_s)  # the busy workspace now holds its cap, more waiting
        p99 = await _p99(calm)
        assert all(not task.done() for task in running), "the loops ended too early"
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
    return p99


async def assert_not_slowed_by_busy_loops(
    *, busy: Callable[[int], Awaitable[Any]], calm: Callable[[int], Awaitable[str | None]],
    loops: int, settle_s: float,
) -> None:  # fmt: skip
    """Queued behind the busy workspace, a calm call would wait seconds (a busy loop holds
    its worker until its CPU budget runs out). Beside the loops it only shares the CPU with
    them: its p99 stays under 100 ms, or, on a machine busy with other work, under ten times
    the p99 of the same calls alone, measured just before."""
    alone = await _p99(calm)
    beside = await p99_beside_busy_loops(busy=busy, calm=calm, loops=loops, settle_s=settle_s)
    assert beside < max(0.1, 10 * alone), f"p99 {beside:.3f}s beside the loops, {alone:.3f}s alone"


@contextlib.asynccontextmanager
async def session_runner() -> AsyncIterator[Any]:
    """A session's SandboxToolRunner on a channel of its own, fed like a consumer feeds it."""
    from channels.layers import get_channel_layer

    from tools_app.runner import SandboxToolRunner

    layer = get_channel_layer()
    channel = await layer.new_channel()
    runner = SandboxToolRunner(reply_channel=channel)

    async def pump() -> None:
        while True:
            runner.resolve(await layer.receive(channel))

    pumping = asyncio.create_task(pump())
    try:
        yield runner
    finally:
        pumping.cancel()
