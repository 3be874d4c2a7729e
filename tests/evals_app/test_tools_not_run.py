"""Tools of every kind stay unrun in agent tests (docs/testing-agents.md): an MCP tool is
answered by the test's ``tool_results``, and the workspace's real MCP server never hears
of the call."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_app import services as mcp_services
from sessions_app import services as agent_services
from tests.conftest import api_client
from tests.engine.providers.llm.openai.fake_server import (
    Done,
    FakeOpenAIServer,
    Finish,
    text_reply,
    tool_call,
)
from tests.factories import Tenant
from tests.mcp_app.conftest import HOST, loopback_allowed, mcp_server, server  # noqa: F401
from tests.mcp_app.mcp_server import McpTestServer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_allowed")]


async def test_an_mcp_tool_is_not_run_by_an_agent_test(
    owner: Tenant,
    llm: FakeOpenAIServer,
    server: McpTestServer,  # noqa: F811
    settings: Any,
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True

    def setup() -> None:
        connection = mcp_services.mcp_server_create(
            workspace=owner.workspace, name="crm", url=f"http://{HOST}:{server.port}/mcp"
        )
        agent = agent_services.agent_create(
            workspace=owner.workspace, name="Desk", slug="desk", mode="text"
        )
        mcp_services.agent_mcp_tools_set(
            agent=agent, tools=[{"server": str(connection.uid), "tool": "delete_everything"}]
        )

    await sync_to_async(setup)()
    client = api_client(owner.secret_key)
    test = {
        "name": "cleanup",
        "turns": [{"user": "Tidy up please", "tool_called": "delete_everything"}],
        "tool_results": {"delete_everything": {"ok": True, "mocked": True}},
    }
    saved = await sync_to_async(client.post)("/api/v1/agents/desk/tests", test, format="json")
    assert saved.status_code == 201, saved.content
    llm.script(*tool_call(0, "c1", "delete_everything", "{}"), Finish("tool_calls"), Done())
    llm.script(text_reply("Done."))
    started = await sync_to_async(client.post)("/api/v1/agents/desk/test-runs", {}, format="json")
    assert started.status_code == 202, started.content
    run = (await sync_to_async(client.get)(f"/api/v1/test-runs/{started.json()['id']}")).json()
    assert run["status"] in ("passed", "failed"), run
    assert run["status"] == "passed", run
    assert "delete_everything" not in server.calls, (server.calls, run)
