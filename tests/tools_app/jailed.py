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


def _p99_of(latencies: list[float]) -> float:
    latencies = sorted(latencies)
    return latencies[max(0, int(len(latencies) * 0.99) - 1)]


async def _latencies(
    calm: Callable[[int], Awaitable[str | None]], *, until: Callable[[], bool] = lambda: False
) -> list[float]:
    """Up to 40 trivial calls, one after another, stopping early once ``until()`` holds."""
    latencies = []
    for n in range(1, 41):
        if until():
            break
        started = time.perf_counter()
        assert await calm(n) == str(n)
        latencies.append(time.perf_counter() - started)
    return latencies


async def p99_beside_busy_loops(
    *, busy: Callable[[int], Awaitable[Any]], calm: Callable[[int], Awaitable[str | None]],
    loops: int, settle_s: float,
) -> float:  # fmt: skip
    """Start ``loops`` busy calls of one workspace, then time up to 40 trivial calls of
    another (``calm(n)`` must answer ``str(n)``); the p99 in seconds of the calls made while
    every busy call was still running or waiting. On a slow machine a loop may reach its CPU
    budget before 40 calls are done: the calls made until then count, at least ten."""
    running = [asyncio.create_task(busy(n)) for n in range(loops)]
    try:
        await asyncio.sleep(settle_s)  # the busy workspace now holds its cap, more waiting
        assert all(not task.done() for task in running), "the loops ended before any call"
        latencies = await _latencies(calm, until=lambda: any(task.done() for task in running))
        if any(task.done() for task in running):
            latencies = latencies[:-1]  # the last call may have ended after a loop did
        assert len(latencies) >= 10, f"only {len(latencies)} calls beside the running loops"
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
    return _p99_of(latencies)


async def assert_not_slowed_by_busy_loops(
    *, busy: Callable[[int], Awaitable[Any]], calm: Callable[[int], Awaitable[str | None]],
    loops: int, settle_s: float,
) -> None:  # fmt: skip
    """Queued behind the busy workspace, a calm call would wait seconds (a busy loop holds
    its worker until its CPU budget runs out). Beside the loops it only shares the CPU with
    them: its p99 stays under 100 ms, or, on a machine busy with other work, under ten times
    the p99 of the same calls alone, measured just before."""
    alone = _p99_of(await _latencies(calm))
    beside = await p99_beside_busy_loops(busy=busy, calm=calm, loops=loops, settle_s=settle_s)
    assert beside < max(0.1, 10 * alone), f"p99 {beside:.3f}s beside the loops, {alone:.3f}s alone"


@contextlib.asynccontextmanager
async def session_runner() -> AsyncIterator[Any]:
    """A session's SandboxToolRunner on a channel of its own, fed like a consumer feeds it."""
    from channels.layers import get_channel_layer

    from core.channel_messages import ToolResultDelivery, decode
    from tools_app.runner import SandboxToolRunner

    layer = get_channel_layer()
    channel = await layer.new_channel()
    runner = SandboxToolRunner(reply_channel=channel)

    async def pump() -> None:
        while True:
            delivery = decode(await layer.receive(channel))
            if isinstance(delivery, ToolResultDelivery):
                runner.resolve(delivery.call_id, delivery.result)

    pumping = asyncio.create_task(pump())
    try:
        yield runner
    finally:
        pumping.cancel()
