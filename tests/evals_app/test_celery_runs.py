"""A test run as production runs it: the request queues a task on the ``evals`` queue, a real
Celery worker (started here, on that queue only) holds the conversation with the scripted
LLM server and writes the result."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings

from evals_app.models import TestRun
from sessions_app import services as agent_services
from tests.conftest import api_client, worker_database_url
from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer, text_reply
from tests.factories import Tenant
from tests.faults.processes import Process, celery_worker
from tests.sessions_app.recording import eventually

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]


def _worker(tmp_path: Path, llm_url: str) -> Process:
    env = {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "REDIS_URL": django_settings.REDIS_URL,
        "LLM_BASE_URL": llm_url,
        "LLM_API_KEY": "evals-llm-key",
    }
    return celery_worker("evals", env=env, log=tmp_path / "worker.log")


async def test_a_celery_worker_on_the_evals_queue_runs_the_tests(
    owner: Tenant, llm: FakeOpenAIServer, tmp_path: Path, settings: Any
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False  # REDIS_URL is set: the task goes to Redis
    await sync_to_async(agent_services.agent_create)(
        workspace=owner.workspace, name="Shop", slug="shop", mode="text"
    )
    client = api_client(owner.secret_key)
    test = {"name": "greets", "turns": [{"user": "Hi", "reply_contains": "hello"}]}
    await sync_to_async(client.post)("/api/v1/agents/shop/tests", test, format="json")
    llm.script(text_reply("Hello there!"))
    worker = await asyncio.to_thread(_worker, tmp_path, llm.base_url)
    try:
        started = await sync_to_async(client.post)(
            "/api/v1/agents/shop/test-runs", {}, format="json"
        )
        assert started.json()["status"] == "queued"  # the request did not run it
        run = await eventually(lambda: TestRun.objects.filter(status="passed").first(), within=60)
        assert run.message == "1 of 1 tests passed"
        assert "evals.test_run" in worker.log_text()
    finally:
        worker.stop()
