"""The evals queue is shared fairly: a workspace has at most EVALS_WORKSPACE_CONCURRENCY
test runs and simulations queued or running, the rest parked (not queued), so another
workspace's run starts after at most that many of a busy one's, however many it started
(before, the queue was first come, first served). A slot comes back when its run fails,
and lapses when its worker was killed (the sweep then queues what waited)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings

from evals_app import dispatch
from evals_app.models import TestRun
from platform_site.celery import app as celery_app
from sessions_app import services as agent_services
from tests.conftest import api_client, worker_database_url
from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer, text_reply
from tests.factories import Tenant
from tests.faults.processes import celery_worker
from tests.sessions_app.recording import eventually

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

GREETS = {"name": "greets", "turns": [{"user": "Hi", "reply_contains": "hello"}]}


def _agent_with_a_test(tenant: Tenant) -> Any:
    agent_services.agent_create(workspace=tenant.workspace, name="Shop", slug="shop", mode="text")
    client = api_client(tenant.secret_key)
    assert client.post("/api/v1/agents/shop/tests", GREETS, format="json").status_code == 201
    return client


@pytest.mark.slow
async def test_another_workspaces_run_goes_before_a_busy_workspaces_queued_runs(
    owner: Tenant, outsider: Tenant, llm: FakeOpenAIServer, tmp_path: Path, settings: Any
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False  # REDIS_URL is set: the tasks go to Redis
    settings.EVALS_WORKSPACE_CONCURRENCY = 1
    await asyncio.to_thread(_purge, "evals")  # an earlier test's task would run first
    busy = await sync_to_async(_agent_with_a_test)(owner)
    calm = await sync_to_async(_agent_with_a_test)(outsider)
    for _ in range(4):  # queued before any worker is up: the order the queue would serve
        started = await sync_to_async(busy.post)("/api/v1/agents/shop/test-runs", {}, format="json")
        assert started.status_code == 202, started.content
    started = await sync_to_async(calm.post)("/api/v1/agents/shop/test-runs", {}, format="json")
    assert started.status_code == 202, started.content
    assert await sync_to_async(dispatch.slots.parked)(owner.workspace.pk) == 3
    for _ in range(5):
        llm.script(text_reply("Hello there!"))
    env = {
        **os.environ, "DATABASE_URL": worker_database_url(),
        "REDIS_URL": django_settings.REDIS_URL, "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": "evals-llm-key", "EVALS_WORKSPACE_CONCURRENCY": "1",
    }  # fmt: skip
    worker = await asyncio.to_thread(celery_worker, "evals", env=env, log=tmp_path / "w.log")
    try:
        await eventually(
            lambda: TestRun.objects.filter(status="passed").count() == 5 or None, within=120
        )
    finally:
        worker.stop()
    order = await sync_to_async(list)(
        TestRun.objects.order_by("finished_at").values_list("workspace_id", flat=True)
    )
    # One busy run was queued ahead of it; the other three waited parked behind it.
    assert order.index(outsider.workspace.pk) <= 1, order
    assert await sync_to_async(dispatch.slots.in_flight)(owner.workspace.pk) == 0
    assert await sync_to_async(dispatch.slots.parked)(owner.workspace.pk) == 0


def _purge(queue: str) -> None:
    """Empty ``queue`` on this test worker's broker: tasks earlier tests left in it (their
    runs long gone) would go ahead of this test's."""
    with celery_app.connection_for_write() as connection:
        connection.default_channel.queue_purge(queue)


def _runs(tenant: Tenant, count: int) -> list[int]:
    _agent_with_a_test(tenant)
    agent = tenant.workspace.agents.get(slug="shop")
    return [
        TestRun.objects.create(workspace=tenant.workspace, agent=agent).pk for _ in range(count)
    ]


def test_a_failing_run_gives_its_slot_back_to_the_next(
    owner: Tenant, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.EVALS_WORKSPACE_CONCURRENCY = 1
    started: list[tuple[str, str]] = []
    monkeypatch.setattr(dispatch, "_start", lambda job, slot: started.append((job, slot)))
    first, second = _runs(owner, 2)
    dispatch.schedule(dispatch.TEST_RUN_TASK, first, owner.workspace.pk)
    dispatch.schedule(dispatch.TEST_RUN_TASK, second, owner.workspace.pk)
    assert [job for job, _ in started] == [f"evals.test_run|{first}"]  # the second is parked

    def breaks(run_id: int) -> None:
        raise RuntimeError("the worker's run broke")

    with pytest.raises(RuntimeError):
        dispatch.run_in_slot(first, started[0][1], breaks)
    assert [job for job, _ in started][1:] == [f"evals.test_run|{second}"]
    assert dispatch.slots.parked(owner.workspace.pk) == 0
    dispatch.run_in_slot(second, started[1][1], lambda run_id: None)
    assert dispatch.slots.in_flight(owner.workspace.pk) == 0


def test_a_killed_workers_slot_lapses_and_the_sweep_queues_what_waited(
    owner: Tenant, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.EVALS_WORKSPACE_CONCURRENCY = 1
    settings.EVALS_SLOT_TTL_S = 1.0
    started: list[str] = []
    monkeypatch.setattr(dispatch, "_start", lambda job, slot: started.append(job))
    killed, waiting = _runs(owner, 2)
    dispatch.schedule(dispatch.TEST_RUN_TASK, killed, owner.workspace.pk)  # never given back
    dispatch.schedule(dispatch.TEST_RUN_TASK, waiting, owner.workspace.pk)
    assert dispatch.sweep() == 0  # the slot is still held
    time.sleep(1.2)
    assert dispatch.sweep() == 1
    assert started == [f"evals.test_run|{killed}", f"evals.test_run|{waiting}"]
    assert dispatch.slots.parked(owner.workspace.pk) == 0
