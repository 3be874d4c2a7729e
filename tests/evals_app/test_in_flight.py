"""Test runs and simulations are bounded per workspace, and the bound holds for requests
arriving at the same instant (the count and the insert are one step under a lock on the
workspace's row)."""

from __future__ import annotations

from typing import Any

import pytest

from evals_app import tasks
from evals_app.models import Simulation, TestRun
from sessions_app import services as agent_services
from tests.concurrency import at_once
from tests.conftest import api_client
from tests.factories import Tenant, order_tool

pytestmark = pytest.mark.django_db(transaction=True)


def _agent(tenant: Tenant) -> None:
    agent_services.agent_create(
        workspace=tenant.workspace, name="Shop", slug="shop", mode="text",
        instructions="Help with orders.", tools=[order_tool()],
    )  # fmt: skip


def test_test_runs_past_the_in_flight_bound_are_refused(
    owner: Tenant, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.TEST_RUNS_IN_FLIGHT_MAX = 3
    monkeypatch.setattr(tasks, "test_run_start", lambda run_id: None)  # stay queued
    _agent(owner)
    client = api_client(owner.secret_key)
    saved = client.post(
        "/api/v1/agents/shop/tests",
        {"name": "t", "turns": [{"user": "hi", "reply_contains": "x"}]},
        format="json",
    )
    assert saved.status_code == 201, saved.content
    responses = [client.post("/api/v1/agents/shop/test-runs", {}, format="json") for _ in range(6)]
    assert [r.status_code for r in responses] == [202] * 3 + [429] * 3
    assert "at most 3 test runs" in responses[-1].content.decode()
    assert TestRun.objects.filter(workspace=owner.workspace).count() == 3


@pytest.mark.postgres  # PostgreSQL's behaviour (NUL refused, row locks across threads)
def test_test_runs_posted_at_once_stay_within_the_bound(
    owner: Tenant, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.TEST_RUNS_IN_FLIGHT_MAX = 2
    monkeypatch.setattr(tasks, "test_run_start", lambda run_id: None)
    _agent(owner)
    key = owner.secret_key

    def post(index: int) -> int:
        return int(
            api_client(key).post("/api/v1/agents/shop/test-runs", {}, format="json").status_code
        )

    codes = at_once(post, 6)
    assert sorted(codes) == [202, 202, 429, 429, 429, 429], codes
    assert TestRun.objects.filter(workspace=owner.workspace).count() == 2


@pytest.mark.postgres  # PostgreSQL's behaviour (NUL refused, row locks across threads)
def test_simulation_in_flight_bound_holds_under_concurrency(
    owner: Tenant, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks, "simulations_start", lambda ids: None)
    _agent(owner)
    key = owner.secret_key
    scenarios = [{"persona": "p", "goal": "g", "criteria": ["c"], "max_turns": 1}] * 10

    def post(index: int) -> int:
        response = api_client(key).post(
            "/api/v1/agents/shop/simulations", {"scenarios": scenarios}, format="json"
        )
        return int(response.status_code)

    codes = at_once(post, 6)
    made = Simulation.objects.filter(workspace=owner.workspace).count()
    assert made == settings.SIMULATIONS_IN_FLIGHT_MAX == 20, (made, codes)
    assert sorted(codes) == [202, 202, 400, 400, 400, 400], codes
