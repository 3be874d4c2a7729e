"""Tool calls through Redis and real Celery workers are granted round-robin across
workspaces: one workspace's flood of short calls, a killed worker and a holder that died
leave other calls served (tools_app/fairness.py)."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from core.leases import redis_client
from tests.factories import make_tenant
from tests.tools_app.jailed import session_runner
from tests.tools_app.test_fair_flood import SHORT_LOOP, assert_fair_beside_a_flood
from tools_app import fairness

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture(autouse=True)
async def _no_slots_held():
    client = redis_client()
    keys = [key async for key in client.scan_iter(f"{fairness.PREFIX}:*")]
    if keys:
        await client.delete(*keys)


async def _slot_keys() -> dict[str, Any]:
    client = redis_client()
    return {
        "held": await client.zcard(f"{fairness.PREFIX}:held"),
        "ready": await client.zcard(f"{fairness.PREFIX}:ready"),
    }


def _invocation(workspace_id: int, handler: str, n: int, timeout_s: float = 20) -> Any:
    from engine.tools.call import ToolRequest

    return ToolRequest(
        call_id=f"call-{workspace_id}-{n}", session_id="fair", workspace_id=workspace_id,
        name="t", handler=handler, arguments={"n": n}, timeout_s=timeout_s, pinned=False,
    )  # fmt: skip


async def test_a_freed_slot_goes_to_the_workspace_served_least(settings) -> None:
    """One slot: the flooding workspace holds it with two calls waiting; a call of another
    workspace that arrives after them is granted the slot first, then the flood's in order;
    each waiter is told at once, without polling (well under the slow re-check)."""
    settings.SANDBOX_QUEUE_SLOTS = 1
    order: list[str] = []
    released = asyncio.Event()

    async def call(workspace_id: int, name: str, hold: asyncio.Event | None = None) -> float:
        async with fairness.workspace_slot(
            workspace_id=workspace_id, member=name, limit=4, hold_s=30, wait_s=10
        ):
            granted = time.monotonic()
            order.append(name)
            if hold is not None:
                await hold.wait()
            return granted

    first = asyncio.create_task(call(1, "flood-0", released))
    await asyncio.sleep(0.2)
    waiting = [asyncio.create_task(call(1, f"flood-{n}")) for n in (1, 2)]
    await asyncio.sleep(0.2)
    waiting.append(asyncio.create_task(call(2, "calm")))
    await asyncio.sleep(0.2)
    assert order == ["flood-0"]
    freed = time.monotonic()
    released.set()
    granted = await asyncio.gather(first, *waiting)
    assert order == ["flood-0", "calm", "flood-1", "flood-2"]
    assert granted[3] - freed < fairness.RECHECK_S / 2
    assert await _slot_keys() == {"held": 0, "ready": 0}


async def test_a_holder_that_died_gives_its_slot_back_when_it_expires(settings) -> None:
    """A process that took a slot and died never releases it: the slot expires after its
    hold time and the next waiter's re-check hands it on."""
    settings.SANDBOX_QUEUE_SLOTS = 1
    await fairness._script("wait", 1, "dead-process", f"{time.time() + 5}|1.0|nobody|dead", 5)
    started = time.monotonic()
    async with fairness.workspace_slot(
        workspace_id=2, member="next", limit=4, hold_s=30, wait_s=10
    ):
        waited = time.monotonic() - started
    assert 0.5 < waited < 1.0 + fairness.RECHECK_S + 2
    assert await _slot_keys() == {"held": 0, "ready": 0}


async def test_a_waiter_that_gives_up_leaves_the_queue(settings) -> None:
    settings.SANDBOX_QUEUE_SLOTS = 1
    async with fairness.workspace_slot(
        workspace_id=1, member="holder", limit=4, hold_s=30, wait_s=10
    ):
        with pytest.raises(fairness.NoSlot):
            async with fairness.workspace_slot(
                workspace_id=2, member="impatient", limit=4, hold_s=30, wait_s=0.3
            ):
                pass
        assert (await _slot_keys())["ready"] == 0
    assert await _slot_keys() == {"held": 0, "ready": 0}


async def test_a_flood_of_short_calls_does_not_slow_another_workspace_celery(
    worker, settings
) -> None:
    """Three worker processes and three slots; three workspaces flood, each with more calls
    at once than its cap (4) and together 12 of them: first come first served, the calm
    call would queue behind their backlog; granted round-robin it takes the next free
    slot."""
    settings.SANDBOX_QUEUE_SLOTS = 3
    flooding = [
        (await sync_to_async(make_tenant)(f"flood{n}@example.com")).workspace.pk for n in range(3)
    ]
    calm_ws = (await sync_to_async(make_tenant)("calm@example.com")).workspace.pk
    await sync_to_async(worker)(443, 3)
    async with session_runner() as runner:
        assert (await runner.run(_invocation(calm_ws, "() => 0", 0))).status == "completed"

        async def calm(n: int) -> str | None:
            return (await runner.run(_invocation(calm_ws, "(a) => a.n", n))).result

        numbers = itertools.count(1000)  # every call of the flood a call id of its own

        async def short(_: int) -> Any:
            n = next(numbers)
            outcome = await runner.run(_invocation(flooding[n % 3], SHORT_LOOP, n))
            assert outcome.status == "completed", outcome.error

        await assert_fair_beside_a_flood(short=short, calm=calm)
    assert await _slot_keys() == {"held": 0, "ready": 0}


async def test_a_killed_worker_process_leaks_no_slot(worker, settings, tmp_path) -> None:
    """One slot: the task process running a call is killed; the call fails at once (its
    worker reports it) and the slot is free for the next call of the same workspace."""
    settings.SANDBOX_QUEUE_SLOTS = 1
    settings.SANDBOX_WORKSPACE_CONCURRENCY = 1
    busy_ws = (await sync_to_async(make_tenant)("flood@example.com")).workspace.pk
    process = await sync_to_async(worker)(443, 1)
    async with session_runner() as runner:
        spinning = asyncio.create_task(
            runner.run(_invocation(busy_ws, "() => { while (true) {} }", 1, timeout_s=25))
        )
        children = await _children_when_running(process.pid, tmp_path / "worker.log")
        for child in children:
            os.kill(child, signal.SIGKILL)
        lost = await asyncio.wait_for(spinning, 15)
        assert lost.status == "failed"
        assert (await _slot_keys())["held"] == 0
        after = await runner.run(_invocation(busy_ws, "(a) => a.n", 2))
        assert (after.status, after.result) == ("completed", "2")
    assert await _slot_keys() == {"held": 0, "ready": 0}


async def _children_when_running(pid: int, log: Path) -> list[int]:
    """The Celery task processes once one of them has taken the call (its worker logs it)
    and its handler had time to start."""
    deadline = time.monotonic() + 20
    while "Task tools.execute" not in await asyncio.to_thread(log.read_text):
        assert time.monotonic() < deadline, "the call never reached the worker"
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)
    listing = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in (await asyncio.to_thread(listing.read_text)).split()]
