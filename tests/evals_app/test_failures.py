"""A failing judge or simulated-user LLM request finishes the run or simulation as
`error` with a fixed sentence (never the provider's text) and frees its in-flight slot;
the sweep finishes runs a lost worker left unfinished."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from evals_app import services
from evals_app.models import Simulation, Status, TestRun
from sessions_app import services as agent_services
from tests.conftest import api_client
from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer, HttpError, text_reply
from tests.factories import Tenant

pytestmark = pytest.mark.django_db(transaction=True)
LEAKY = "Incorrect API key provided: sk-live-SECRET123456"


async def _shop(owner: Tenant, settings: Any) -> Any:
    """An agent, tasks run in the request (their errors not raised), and a client."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.CELERY_TASK_EAGER_PROPAGATES = False
    await sync_to_async(agent_services.agent_create)(
        workspace=owner.workspace, name="Shop", slug="shop", mode="text", instructions="Hi."
    )
    return api_client(owner.secret_key)


async def test_a_failing_judge_finishes_the_run_without_the_providers_text(
    owner: Tenant, llm: FakeOpenAIServer, settings: Any
) -> None:
    client = await _shop(owner, settings)
    test = {"name": "t", "turns": [{"user": "hello", "judge": "The agent greets."}]}
    saved = await sync_to_async(client.post)("/api/v1/agents/shop/tests", test, format="json")
    assert saved.status_code == 201, saved.content
    llm.script(text_reply("Hello!"))
    for _ in range(6):  # the judge, and any retries of it
        llm.script(HttpError(401, LEAKY))
    try:
        started = await sync_to_async(client.post)(
            "/api/v1/agents/shop/test-runs", {}, format="json"
        )
    except Exception as error:  # the eager task raising through the view
        pytest.fail(f"the run's error reached the caller: {error!r}"[:300])
    run = (await sync_to_async(client.get)(f"/api/v1/test-runs/{started.json()['id']}")).json()
    assert run["status"] == "error", run
    assert run["message"] == services.FAILED_LLM
    assert "SECRET123456" not in json.dumps(run)


async def test_a_failing_simulation_frees_its_in_flight_slot(
    owner: Tenant, llm: FakeOpenAIServer, settings: Any
) -> None:
    client = await _shop(owner, settings)
    for _ in range(12):
        llm.script(HttpError(401, LEAKY))
    scenario = {"persona": "p", "goal": "g", "criteria": ["c"], "max_turns": 1}
    try:
        started = await sync_to_async(client.post)(
            "/api/v1/agents/shop/simulations", {"scenarios": [scenario]}, format="json"
        )
    except Exception as error:
        pytest.fail(f"the simulation's error reached the caller: {error!r}"[:300])
    assert started.status_code in (201, 202), started.content
    listed = (await sync_to_async(client.get)("/api/v1/agents/shop/simulations")).json()
    statuses = [
        item["status"]
        for item in (listed.get("results", listed) if isinstance(listed, dict) else listed)
    ]
    assert statuses == ["error"], statuses
    assert "SECRET123456" not in json.dumps(listed)


def test_the_sweep_finishes_runs_left_unfinished(owner: Tenant, settings: Any) -> None:
    from datetime import timedelta

    from django.utils import timezone

    agent = agent_services.agent_create(
        workspace=owner.workspace, name="Shop", slug="shop", mode="text", instructions="Hi."
    )
    old = timezone.now() - timedelta(minutes=settings.EVALS_STUCK_AFTER_MIN + 1)
    stuck = TestRun.objects.create(
        workspace=owner.workspace, agent=agent, status=Status.RUNNING, created_at=old
    )
    fresh = TestRun.objects.create(workspace=owner.workspace, agent=agent, status=Status.RUNNING)
    lost = Simulation.objects.create(
        workspace=owner.workspace, agent=agent, persona="p", goal="g", created_at=old
    )
    assert services.stuck_sweep() == 2
    for item in (stuck, fresh, lost):
        item.refresh_from_db()
    assert (stuck.status, lost.status, fresh.status) == (Status.ERROR, Status.ERROR, Status.RUNNING)
    assert stuck.message == services.STUCK and stuck.finished_at is not None
    assert "evals-stuck-sweep" in settings.CELERY_BEAT_SCHEDULE
