"""Run a handler the production way from a test: in a pool of jailed worker processes whose
parent is the test process (``tools_app.pool``), with a fetcher the test provides."""

from __future__ import annotations

import json
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
