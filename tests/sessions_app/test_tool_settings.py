"""An agent's tool settings reach its sessions: the filler and when it is said, the
knowledge search's timeout (enforced by the knowledge kind), MCP tools' own timeouts."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from engine import protocol
from engine.session.config import DEFAULT_TOOL_FILLER, DEFAULT_TOOL_FILLER_AFTER_S
from engine.tools.call import ToolRequest, ToolStatus
from knowledge_app import services as knowledge_services
from knowledge_app import session_tool as knowledge_tool
from realtime.access import Access
from realtime.session_setup import session_plan_build
from secrets_app.models import ApiKey
from sessions_app.models import Agent
from tests.factories import Tenant

pytestmark = pytest.mark.django_db


def _config(owner: Tenant, slug: str) -> Any:
    key = ApiKey.objects.filter(workspace=owner.workspace, kind=ApiKey.Kind.PUBLISHABLE).first()
    assert key is not None
    agent = Agent.objects.get(workspace=owner.workspace, slug=slug)
    access = Access(key=key, workspace=owner.workspace, origin="", agent=agent)
    plan = session_plan_build(
        access=access, configure=protocol.ConfigureMessage(agent=slug, mode="text"),
        session_id="s", resume_token="r",
    )  # fmt: skip
    return plan.config


def test_the_agents_filler_and_knowledge_timeout_reach_the_session(
    owner: Tenant, owner_api: APIClient
) -> None:
    response = owner_api.post(
        "/api/v1/agents",
        {"name": "Desk", "slug": "desk", "tool_filler": "Bear with me.",
         "tool_filler_after_ms": 800, "knowledge_timeout_ms": 2500},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    assert response.json()["tool_filler_after_ms"] == 800
    base = knowledge_services.knowledge_base_create(workspace=owner.workspace, name="Help")
    agent = Agent.objects.get(slug="desk")
    knowledge_services.agent_knowledge_set(agent=agent, knowledge_base_uids=[str(base.uid)])
    config = _config(owner, "desk")
    assert (config.tool_filler, config.tool_filler_after_s) == ("Bear with me.", 0.8)
    (search,) = [tool for tool in config.tools if tool.name == "search_knowledge"]
    assert search.timeout_s == 2.5

    owner_api.patch("/api/v1/agents/desk", {"tool_filler_after_ms": 0}, format="json")
    assert _config(owner, "desk").tool_filler_after_s == 0  # never


def test_defaults_when_the_agent_says_nothing(owner: Tenant, owner_api: APIClient) -> None:
    owner_api.post("/api/v1/agents", {"name": "Plain", "slug": "plain"}, format="json")
    config = _config(owner, "plain")
    assert config.tool_filler == DEFAULT_TOOL_FILLER
    assert config.tool_filler_after_s == DEFAULT_TOOL_FILLER_AFTER_S


def test_a_knowledge_search_past_its_timeout_fails_the_tool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def slow_search(*args: Any) -> list[Any]:
        time.sleep(0.5)
        return []

    monkeypatch.setattr(knowledge_tool, "_search", slow_search)
    request = ToolRequest(
        call_id="c", workspace_id=1, name="search_knowledge", arguments={"query": "hours"},
        timeout_s=0.1, kind="knowledge",
    )  # fmt: skip
    began = time.monotonic()
    outcome = asyncio.run(knowledge_tool.KnowledgeSearch((1,)).run(request))
    assert time.monotonic() - began < 0.4
    assert outcome.status is ToolStatus.TIMED_OUT
    assert outcome.error == "the document search took longer than 0.1 s"
    knowledge_tool.searches_stop()
