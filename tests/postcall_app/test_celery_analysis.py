"""Analysis as production runs it: the session's end queues a task on the ``postcall``
queue, a real Celery worker (started here, listening on that queue only) asks the scripted
LLM, and the session's record has the analysis."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings

from sessions_app import services
from sessions_app.models import SessionAnalysis
from tests.conftest import worker_database_url
from tests.engine.providers.llm.openai import fake_server as fake_openai
from tests.factories import Tenant
from tests.faults.processes import Process, celery_worker
from tests.sessions_app.recording import eventually
from tests.sessions_app.wsclient import Client

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
        "LLM_API_KEY": "test-llm-key",
    }
    return celery_worker("postcall", env=env, log=tmp_path / "worker.log")


async def test_a_celery_worker_on_the_postcall_queue_analyses_an_ended_session(
    owner: Tenant, llm: fake_openai.FakeOpenAIServer, tmp_path: Path, settings: Any
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False  # REDIS_URL is set: the task goes to Redis
    await sync_to_async(services.agent_create)(
        workspace=owner.workspace, name="Orders", slug="orders", analysis={"summary": True}
    )
    llm.script(fake_openai.text_reply("It has shipped."))
    filled = json.dumps({"summary": "An order was asked about."})
    llm.script(
        *fake_openai.tool_call(0, "c", "record_analysis", filled),
        fake_openai.Finish("tool_calls"),
        fake_openai.Done(),
    )
    worker = await asyncio.to_thread(_worker, tmp_path, llm.base_url)
    try:
        async with Client(f"/v1/session?key={owner.publishable_key}") as client:
            await client.send({"type": "configure", "agent": "orders", "mode": "text"})
            await client.until("ready")
            await client.send({"type": "text", "text": "Where is my order?"})
            await client.until("metrics")
        analysis = await eventually(
            lambda: SessionAnalysis.objects.exclude(status="pending").first(), within=60
        )
    finally:
        await asyncio.to_thread(worker.stop)
    assert (analysis.status, analysis.summary) == ("completed", "An order was asked about.")
    assert "postcall.analysis_run" in worker.log_text()
    assert analysis.usage["estimated_llm_requests"] == 1  # no usage reported: estimated
