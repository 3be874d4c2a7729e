"""The sandbox as an isolation boundary: what a worker process can reach, what kills it,
and that one call's trouble never becomes another call's (issue 13's attacks)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from engine.tools.call import ToolRequest
from tests.factories import make_tenant
from tests.tools_app.jailed import (
    BUSY_LOOP,
    assert_not_slowed_by_busy_loops,
    run_jailed,
    worker_pids,
)
from tools_app import pool
from tools_app.services import tool_execute

PROBE = Path(__file__).with_name("jail_probe.py")
MB = 1024 * 1024


async def _bytes_fetcher(body: bytes) -> Any:
    async def fetch(request: dict[str, Any]) -> dict[str, Any]:
        encoded = base64.b64encode(body).decode()
        return {"status": 200, "headers": [], "body": encoded, "url": request["url"]}

    return fetch


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as status:
        return dict(line.split(":\t", 1) for line in status.read().splitlines() if ":\t" in line)


def _environ(pid: int) -> bytes:
    with open(f"/proc/{pid}/environ", "rb") as environ:
        return environ.read()


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in {"Z", "X"}
    except FileNotFoundError:
        return True


def _limits(pid: int) -> str:
    with open(f"/proc/{pid}/limits") as limits:
        return limits.read()


# -- what a worker process is -----------------------------------------------------------


def test_a_hardened_worker_has_no_way_out_but_its_pipe() -> None:
    command = pool.jail_command(768 * MB)
    command[3] = str(PROBE)
    # Another worker, as a worker runs (nobody): tgkill reached it past kill's rule.
    as_nobody = (lambda: (os.setgid(65534), os.setuid(65534))) if os.getuid() == 0 else None
    neighbour = subprocess.Popen(["sleep", "60"], preexec_fn=as_nobody)
    try:
        finished = subprocess.run(
            [*command, str(neighbour.pid)], env={}, capture_output=True, timeout=60, check=True
        )
    finally:
        neighbour.kill()
    report = json.loads(finished.stdout)
    attempts = report["attempts"]
    assert set(attempts.values()) == {"refused: errno 1"}, attempts
    assert set(report["environ"]) <= {"LC_CTYPE"}
    protections = report["protections"]
    assert protections["syscall_filter"] is True and protections["no_new_processes"] is True
    assert protections["memory_limit_mb"] == 768 and protections["file_writes"] == "blocked"
    if os.getuid() == 0:
        assert protections["uid"] == 65534 and protections["network_namespace"] is True


async def test_a_running_worker_holds_no_credentials_and_runs_under_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://db-password@db/platform")
    monkeypatch.setenv("SECRETS_KEYRING", "k1:c2VjcmV0LWtleXJpbmc=")
    worker = pool.SandboxWorker(768 * MB)

    async def start() -> int:
        await worker.start()
        assert worker.pid is not None
        return worker.pid

    pid = await pool.run_on_pool_loop(start())
    try:
        variables = _environ(pid)
        assert b"DATABASE_URL" not in variables and b"SECRETS_KEYRING" not in variables
        assert _status(pid)["Seccomp"].strip() == "2"  # a filter is installed
        limits = _limits(pid)
        assert f"Max data size             {768 * MB}" in limits
        assert "Max file size             0" in limits and "Max core file size        0" in limits
        if os.getuid() == 0:
            assert _status(pid)["Uid"].split()[0] == "65534"
            assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    finally:
        worker.kill()


def test_healthz_says_which_protections_are_in_force(client: Any, db: None) -> None:
    checks = client.get("/healthz").json()
    assert checks["sandbox"] == "ok"
    assert checks["sandbox_protections"]["syscall_filter"] is True
    assert checks["sandbox_protections"]["memory_limit_mb"] >= 640


# -- what kills a worker, and what comes after ----------------------------------------------


async def test_a_worker_that_dies_fails_only_its_own_call_at_once() -> None:
    await run_jailed("() => 1")
    victim = next(iter(await worker_pids()))
    looping = asyncio.create_task(run_jailed("() => { while (true) {} }", wall_time_s=20))
    await asyncio.sleep(0.3)
    others = [run_jailed("(a) => a.n", {"n": n}, lane=2) for n in range(3)]
    started = time.monotonic()
    os.kill(victim, signal.SIGSEGV)
    result = await looping
    assert time.monotonic() - started < 2
    assert result.error == pool.WORKER_DIED and not result.ok
    assert [json.loads(r.result_json or "") for r in await asyncio.gather(*others)] == [0, 1, 2]
    assert victim not in await worker_pids()
    assert (await run_jailed("() => 'next'")).result_json == '"next"'


async def test_species_cannot_take_buffers_past_the_budget() -> None:
    source = """() => {
      const x = new Uint8Array(48 * 1024 * 1024);
      x.constructor = undefined;
      const kept = [];
      for (let i = 0; i < 40; i++) kept.push(x.slice(), x.map((b) => b));
      return kept.length;
    }"""
    result = await run_jailed(source, wall_time_s=20)
    assert (result.ok, result.error) == (False, "memory limit exceeded")
    assert (await run_jailed("() => 2")).result_json == "2"


async def test_the_kernel_caps_memory_whatever_the_engine_allows() -> None:
    # With the JavaScript budget set far above the worker's data limit, only the
    # kernel stands between this handler and the machine's memory.
    source = """() => {
      const kept = [];
      for (let i = 0; i < 40; i++) kept.push(new Uint8Array(64 * 1024 * 1024).fill(1));
      return kept.length;
    }"""
    result = await run_jailed(source, heap_bytes=8192 * MB, wall_time_s=20)
    assert not result.ok
    assert "allocation failed" in (result.error or "") or result.error in {
        "memory limit exceeded",
        pool.WORKER_DIED,
    }
    assert (await run_jailed("() => 3")).result_json == "3"


async def test_parallel_calls_of_one_step_all_finish() -> None:
    calls = [run_jailed("async () => 1") for _ in range(8)]
    assert [r.result_json for r in await asyncio.gather(*calls)] == ["1"] * 8


# -- handlers as customers write them -----------------------------------------------------


async def test_fetch_without_await_works_for_the_body_and_explains_the_rest() -> None:
    fetcher = await _bytes_fetcher(b'{"status": "shipped"}')
    quick = "async (a, ctx) => { const r = ctx.fetch('https://api.test/o'); return r.json() }"
    assert json.loads((await run_jailed(quick, fetcher=fetcher)).result_json or "") == {
        "status": "shipped"
    }
    status = "async (a, ctx) => { const r = ctx.fetch('https://api.test/o'); return r.status }"
    error = (await run_jailed(status, fetcher=fetcher)).error or ""
    assert "await ctx.fetch" in error and ".status" in error


async def test_a_binary_body_at_the_size_limit_is_read_without_blowing_up_memory() -> None:
    fetcher = await _bytes_fetcher(bytes([0xFF, 0x00, 0xC3]) * (5 * MB // 3))
    source = """async (a, ctx) => {
      const r = await ctx.fetch('https://api.test/blob');
      const bytes = new Uint8Array(await r.clone().arrayBuffer());
      const text = await r.text();
      return [bytes.length, bytes[0], bytes[2], text.length, text.charCodeAt(0)];
    }"""
    result = await run_jailed(source, fetcher=fetcher, wall_time_s=20)
    assert result.ok, result.error
    size = 5 * MB // 3 * 3
    assert json.loads(result.result_json or "") == [size, 0xFF, 0xC3, size, 0xFFFD]


# -- fair across workspaces ------------------------------------------------------------------


def _run(workspace_id: int, handler: str, n: int = 0) -> ToolRequest:
    return ToolRequest(
        call_id=f"c{n}",
        workspace_id=workspace_id,
        name="t",
        handler=handler,
        arguments={"n": n},
        timeout_s=30,
        pinned=False,
    )


@pytest.mark.django_db(transaction=True)
async def test_one_workspace_busy_looping_at_its_cap_does_not_slow_another(settings) -> None:
    """The embedded platform's own pool, with its default size and per-workspace cap."""
    assert settings.SANDBOX_WORKERS > settings.SANDBOX_WORKSPACE_CONCURRENCY
    busy_ws = (await sync_to_async(make_tenant)("busy@example.com")).workspace.pk
    calm_ws = (await sync_to_async(make_tenant)("calm@example.com")).workspace.pk
    await tool_execute(_run(calm_ws, "() => 0"))  # a worker is up

    async def calm(n: int) -> str | None:
        return (await tool_execute(_run(calm_ws, "(a) => a.n", n))).result

    await assert_not_slowed_by_busy_loops(
        busy=lambda n: tool_execute(_run(busy_ws, BUSY_LOOP, n)),
        calm=calm,
        loops=settings.SANDBOX_WORKSPACE_CONCURRENCY * 2,
        settle_s=0.5,
    )


def test_unsafe_celery_pools_are_refused_at_start(tmp_path: Path) -> None:
    environment = {**os.environ, "REDIS_URL": "redis://127.0.0.1:1/0", "VAR_DIR": str(tmp_path)}
    finished = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "platform_site", "worker", "-P", "threads"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode != 0
    assert "the threads pool is not safe" in finished.stdout + finished.stderr


PARENT_THAT_DIES = """
import asyncio, sys
from tools_app.pool import SandboxWorker
from tools_app.calls import SandboxLimits

async def main():
    worker = SandboxWorker(768 * 1024 * 1024)
    await worker.start()
    print(worker.pid, flush=True)
    async def fetch(request):
        return {}
    await worker.run(source="() => { while (true) {} }", args_json="{}", secrets_json="{}",
                     limits=SandboxLimits(wall_time_s=600, cpu_time_s=600), fetcher=fetch)

asyncio.run(main())
"""


def test_a_worker_dies_with_its_parent_even_mid_call() -> None:
    """A killed task process must not leave its handler running (the parent-death signal
    is set again after the worker changes user, which clears it)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT_THAT_DIES],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    worker_pid = int(parent.stdout.readline())
    time.sleep(0.5)  # the handler is spinning
    parent.kill()
    parent.wait(timeout=10)
    deadline = time.monotonic() + 5
    while not _gone(worker_pid):
        assert time.monotonic() < deadline, "the worker outlived its parent"
        time.sleep(0.05)


async def test_the_kernel_stops_a_worker_whose_parent_does_not_look(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pool, "POLL_S", 60.0)  # the parent's own CPU watch never comes round
    started = time.monotonic()
    result = await run_jailed(BUSY_LOOP, lane=3, cpu_time_s=1, wall_time_s=60)
    assert result.error == pool.WORKER_DIED
    # Well before the parent's next look (60 s): 1 s of CPU, however loaded the machine.
    assert time.monotonic() - started < 45
    assert (await run_jailed("() => 4", lane=3)).result_json == "4"


async def test_an_idle_worker_that_died_gets_no_call() -> None:
    """The kernel's out-of-memory killer may take a worker between calls."""
    await run_jailed("() => 1")
    for pid in await worker_pids():
        os.kill(pid, signal.SIGKILL)
    await asyncio.sleep(0.3)
    assert (await run_jailed("() => 5")).result_json == "5"
