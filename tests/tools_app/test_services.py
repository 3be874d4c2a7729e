"""Running a tool with the workspace's secrets: pinned handlers, references, scrubbing."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from secrets_app import services as secret_services
from tests.factories import make_tenant
from tests.fakes.egress_server import EgressTestServer, echo
from tools_app.services import ToolRun, tool_execute

pytestmark = pytest.mark.django_db(transaction=True)

API_KEY = "weather-api-key-4f9a"


@pytest.fixture
async def workspace_id(settings):
    settings.SANDBOX_EGRESS_ALLOW_PRIVATE = True
    tenant = await sync_to_async(make_tenant)("tools@example.com")
    await sync_to_async(secret_services.secret_set)(
        workspace=tenant.workspace,
        name="WEATHER_KEY",
        value=API_KEY,
        allowed_hosts=["127.0.0.1"],
    )
    return tenant.workspace.pk


def run(workspace_id: int, handler: str, *, pinned: bool, **args: object) -> ToolRun:
    return ToolRun(
        call_id="c1",
        workspace_id=workspace_id,
        name="t",
        handler=handler,
        arguments=dict(args),
        timeout_s=5,
        pinned=pinned,
    )


async def test_unpinned_handler_sees_a_reference_not_the_value(workspace_id):
    outcome = await tool_execute(
        run(workspace_id, "async (a, ctx) => ctx.secrets.WEATHER_KEY", pinned=False)
    )
    assert outcome.status == "completed"
    assert API_KEY not in outcome.result and "WEATHER_KEY" in outcome.result


async def test_returned_secret_values_are_scrubbed(workspace_id):
    outcome = await tool_execute(
        run(workspace_id, "async (a, ctx) => ({k: ctx.secrets.WEATHER_KEY})", pinned=True)
    )
    assert outcome.status == "completed"
    assert json.loads(outcome.result) == {"k": "[secret WEATHER_KEY]"}


async def test_reference_becomes_the_value_only_for_an_allowed_host(workspace_id, settings):
    async with EgressTestServer() as server:
        server.route("/weather", echo())
        settings.SANDBOX_EGRESS_PORTS = [server.port]
        handler = (
            "async (a, ctx) => { const r = await ctx.fetch(a.url, {headers: "
            "{'x-api-key': ctx.secrets.WEATHER_KEY}}); return {status: r.status}; }"
        )
        allowed = await tool_execute(
            run(workspace_id, handler, pinned=False, url=server.url("/weather"))
        )
        assert allowed.status == "completed", allowed.error
        assert server.requests[-1].headers["x-api-key"] == API_KEY

        denied = await tool_execute(
            run(workspace_id, handler, pinned=False, url=server.url("/weather", host="localhost"))
        )
        assert denied.status == "failed"
        assert "WEATHER_KEY" in denied.error and "localhost" in denied.error
        assert API_KEY not in denied.error
        assert len(server.requests) == 1


async def test_handler_errors_and_timeouts_are_outcomes(workspace_id):
    thrown = await tool_execute(
        run(workspace_id, "() => { throw new Error('nope') }", pinned=False)
    )
    assert (thrown.status, "nope" in thrown.error) == ("failed", True)
    looping = ToolRun(
        call_id="c2",
        workspace_id=workspace_id,
        name="t",
        handler="() => { while (true) {} }",
        arguments={},
        timeout_s=0.5,
        pinned=False,
    )
    assert (await tool_execute(looping)).status == "timed_out"
