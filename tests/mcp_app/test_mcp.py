"""MCP servers as tool sources, against a real MCP server built with the same SDK on
loopback (the private-address override on in these tests only): listing, calling, the
secret header only for its host, a redirect to another host refused, a server that hangs
or is down, the allowlist, several calls in one step, and tenancy."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from engine.protocol import ErrorCode, ServerEvent, ToolStatus
from engine.providers.base import ToolCall
from engine.session import SessionConfig, TurnMetrics
from engine.session.state import Turn
from engine.session.tools import ToolCalls
from engine.session.usage import UsageMeter
from engine.tools.call import ToolRequest
from mcp_app import services, session_tool
from mcp_app.models import McpServer
from secrets_app.audit import AuditEvent
from secrets_app.services import secret_set
from sessions_app import services as agent_services
from sessions_app.models import Agent
from tests.engine.providers.fake import FakeToolRunner
from tests.factories import Tenant
from tests.mcp_app.conftest import HOST, OTHER_HOST
from tests.mcp_app.mcp_server import McpTestServer

pytestmark = pytest.mark.usefixtures("loopback_allowed")
TOKEN = "tok-4f1c9e2a7b3d"


def _url(server: McpTestServer, host: str = HOST, path: str = "/mcp") -> str:
    return f"http://{host}:{server.port}{path}"


def _connect(tenant: Tenant, server: McpTestServer, **kwargs: Any) -> McpServer:
    return services.mcp_server_create(
        workspace=tenant.workspace, name=kwargs.pop("name", "crm"),
        url=kwargs.pop("url", _url(server)), **kwargs,
    )  # fmt: skip


def _agent(
    tenant: Tenant, connection: McpServer, *tools: str, timeout_ms: int | None = None
) -> Agent:
    agent = agent_services.agent_create(workspace=tenant.workspace, name="Desk", slug="desk")
    services.agent_mcp_tools_set(
        agent=agent,
        tools=[{"server": str(connection.uid), "tool": t, "timeout_ms": timeout_ms} for t in tools],
    )
    return agent


def _config(agent: Agent) -> SessionConfig:
    config = SessionConfig(
        session_id="s", resume_token="r", workspace_id=agent.workspace_id, llm_name="x"
    )
    session_tool.configure(config, agent=agent)
    return config


async def _call(config: SessionConfig, name: str, arguments: dict[str, Any]) -> Any:
    tool = next(t for t in config.tools if t.name == name)
    request = ToolRequest(
        call_id="c1", workspace_id=config.workspace_id, name=name, arguments=arguments,
        timeout_s=tool.timeout_s or 10, kind=tool.kind, source=tool.source,
    )  # fmt: skip
    return await session_tool.McpTools().run(request)


# --- listing --------------------------------------------------------------------------


@pytest.mark.django_db
def test_connecting_lists_the_servers_tools_with_their_schemas(
    owner: Tenant, owner_api: APIClient, server: McpTestServer
) -> None:
    response = owner_api.post(
        "/api/v1/mcp-servers", {"name": "crm", "url": _url(server)}, format="json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    names = [tool["name"] for tool in body["tools"]]
    assert {"echo", "add", "whoami", "hang", "delete_everything"} <= set(names)
    add = next(tool for tool in body["tools"] if tool["name"] == "add")
    assert add["input_schema"]["properties"].keys() == {"a", "b"} and add["problem"] == ""
    assert body["last_error"] == "" and body["tools_refreshed_at"]
    assert AuditEvent.objects.filter(
        workspace=owner.workspace, action="mcp_server.created", target="crm"
    ).exists()


@pytest.mark.django_db(transaction=True)
def test_an_older_server_is_reached_over_sse(owner: Tenant, server: McpTestServer) -> None:
    connection = _connect(owner, server, url=_url(server, path="/sse"), transport="sse")
    assert "echo" in [tool["name"] for tool in connection.tools]
    agent = _agent(owner, connection, "echo")
    outcome = asyncio.run(_call(_config(agent), "echo", {"text": "over SSE"}))
    assert outcome.status is ToolStatus.COMPLETED
    assert json.loads(outcome.result) == {"result": "over SSE"}


@pytest.mark.django_db
def test_a_server_that_is_down_is_kept_with_the_reason(owner: Tenant) -> None:
    connection = services.mcp_server_create(
        workspace=owner.workspace, name="down", url="http://127.0.0.1:9/mcp"
    )
    assert connection.tools == []
    assert (
        connection.last_error
        == "The tool server 'down' could not be used: could not connect to 127.0.0.1:9."
    )


@pytest.mark.django_db
def test_without_the_override_a_loopback_server_is_refused(
    owner: Tenant, settings: Any, server: McpTestServer
) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = False
    with pytest.raises(ValidationError, match="not a public address"):
        services.mcp_server_create(workspace=owner.workspace, name="lo", url=server.url)
    assert server.seen == []


# --- calls ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_call_reaches_the_server_and_its_result_comes_back(
    owner: Tenant, server: McpTestServer
) -> None:
    agent = _agent(owner, _connect(owner, server), "add", "fail")
    config = _config(agent)
    outcome = asyncio.run(_call(config, "add", {"a": 2, "b": 40}))
    assert outcome.status is ToolStatus.COMPLETED and json.loads(outcome.result) == {"sum": 42.0}
    failed = asyncio.run(_call(config, "fail", {}))
    assert failed.status is ToolStatus.FAILED and "read-only today" in failed.error


@pytest.mark.django_db(transaction=True)
def test_the_secret_header_goes_to_its_host_only_and_never_back(
    owner: Tenant, server: McpTestServer
) -> None:
    secret_set(workspace=owner.workspace, name="CRM_TOKEN", value=TOKEN, allowed_hosts=[HOST])
    headers = [{"name": "Authorization", "value": "Bearer {{secret:CRM_TOKEN}}"}]
    connection = _connect(owner, server, headers=headers)
    assert connection.headers == headers  # the reference is stored, never the value
    outcome = asyncio.run(_call(_config(_agent(owner, connection, "whoami")), "whoami", {}))
    assert server.headers_at("/mcp")[-1]["authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in outcome.result and "[secret CRM_TOKEN]" in outcome.result  # scrubbed

    # Saving it for another host is refused; a row that names it anyway (the secret's
    # hosts changed since) is refused before anything is sent.
    with pytest.raises(ValidationError, match=r"may not be sent to other\.example\.test"):
        _connect(owner, server, name="other", url=_url(server, OTHER_HOST), headers=headers)
    other = McpServer.objects.create(
        workspace=owner.workspace, name="other", url=_url(server, OTHER_HOST), headers=headers
    )
    server.seen.clear()
    services.mcp_server_refresh(server=other)
    assert "secret CRM_TOKEN may not be sent to other.example.test" in other.last_error
    assert server.seen == []


@pytest.mark.django_db
def test_a_redirect_to_another_host_is_refused(owner: Tenant, server: McpTestServer) -> None:
    secret_set(workspace=owner.workspace, name="CRM_TOKEN", value=TOKEN, allowed_hosts=[HOST])
    server.redirect_to = _url(server, OTHER_HOST)
    connection = _connect(
        owner, server, url=_url(server, path="/moved/mcp"),
        headers=[{"name": "Authorization", "value": "Bearer {{secret:CRM_TOKEN}}"}],
    )  # fmt: skip
    assert connection.tools == [] and "could not be used" in connection.last_error
    hosts = [seen.headers.get("host", "") for seen in server.seen]
    assert hosts and all(host.startswith(HOST) for host in hosts)  # nothing reached the other


@pytest.mark.django_db(transaction=True)
def test_a_server_that_hangs_fails_the_tool_in_its_timeout(
    owner: Tenant, server: McpTestServer
) -> None:
    agent = _agent(owner, _connect(owner, server), "hang", timeout_ms=500)
    began = time.monotonic()
    outcome = asyncio.run(_call(_config(agent), "hang", {}))
    assert time.monotonic() - began < 2
    assert outcome.status is ToolStatus.TIMED_OUT
    assert outcome.error == "The tool server 'crm' did not answer within 0.5 s."


@pytest.mark.django_db
def test_only_allowed_tools_are_offered_and_others_refused(
    owner: Tenant, server: McpTestServer
) -> None:
    connection = _connect(owner, server)
    config = _config(_agent(owner, connection, "echo"))
    assert [tool.name for tool in config.tools] == ["echo"]
    errors: list[tuple[ErrorCode, str]] = []
    calls = _tool_calls(config, errors)
    history: list[dict[str, Any]] = []
    asyncio.run(calls.run(_turn(), "", (ToolCall("c", "delete_everything", "{}"),), history))
    assert "unknown tool 'delete_everything'" in history[-1]["content"]
    assert "delete_everything" not in server.calls
    with pytest.raises(ValidationError, match="no tool 'drop_tables'"):
        services.agent_mcp_tools_set(
            agent=Agent.objects.get(slug="desk"),
            tools=[{"server": str(connection.uid), "tool": "drop_tables"}],
        )


@pytest.mark.django_db(transaction=True)
def test_several_calls_in_one_step_run_at_once(owner: Tenant, server: McpTestServer) -> None:
    config = _config(_agent(owner, _connect(owner, server), "slow"))
    history: list[dict[str, Any]] = []
    calls = tuple(ToolCall(f"c{n}", "slow", json.dumps({"seconds": 1.5})) for n in range(4))
    began = time.monotonic()
    asyncio.run(_tool_calls(config, []).run(_turn(), "", calls, history))
    # Four 1.5 s calls one after another would take 6 s; together, 1.5 s and the
    # handshakes (a margin for a loaded machine).
    assert time.monotonic() - began < 4.5
    results = [m["content"] for m in history if m["role"] == "tool"]
    assert results == [json.dumps({"result": "slept 1.5"})] * 4


# --- tenancy --------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_outsider_sees_and_uses_nothing(
    owner: Tenant, outsider: Tenant, outsider_api: APIClient, server: McpTestServer
) -> None:
    connection = _connect(owner, server)
    assert outsider_api.get("/api/v1/mcp-servers").json() == []
    assert outsider_api.get(f"/api/v1/mcp-servers/{connection.uid}").status_code == 404
    assert outsider_api.post(f"/api/v1/mcp-servers/{connection.uid}/refresh").status_code == 404
    assert outsider_api.delete(f"/api/v1/mcp-servers/{connection.uid}").status_code == 404
    agent_services.agent_create(workspace=outsider.workspace, name="Theirs", slug="theirs")
    response = outsider_api.put(
        "/api/v1/agents/theirs/mcp-tools",
        {"tools": [{"server": str(connection.uid), "tool": "echo"}]}, format="json",
    )  # fmt: skip
    assert response.status_code == 400
    # A call naming another workspace's server finds nothing.
    config = SessionConfig(
        session_id="s", resume_token="r", workspace_id=outsider.workspace.pk, llm_name="x"
    )
    request = ToolRequest(
        call_id="c", workspace_id=config.workspace_id, name="echo", arguments={"text": "hi"},
        timeout_s=5, kind="mcp", source=f"{connection.uid}/echo",
    )  # fmt: skip
    outcome = asyncio.run(session_tool.McpTools().run(request))
    assert outcome.status is ToolStatus.FAILED and "echo" not in server.calls


# --- helpers --------------------------------------------------------------------------


def _turn() -> Turn:
    return Turn(id=1, metrics=TurnMetrics(1, "text", 0.0))


def _tool_calls(config: SessionConfig, errors: list[tuple[ErrorCode, str]]) -> ToolCalls:
    async def emit(*events: ServerEvent) -> None:
        return None

    async def handle_error(code: ErrorCode, message: str) -> None:
        errors.append((code, message))

    def spawn(what: str, function: Any, *args: Any) -> asyncio.Task[None]:
        return asyncio.create_task(function(*args))

    return ToolCalls(
        config=config, runner=FakeToolRunner(), usage=UsageMeter(tts_sample_rate=16000),
        emit=emit, handle_error=handle_error, spawn=spawn, clock=time.monotonic,
    )  # fmt: skip


# --- a turn ---------------------------------------------------------------------------


@pytest.mark.usefixtures("no_leases")
@pytest.mark.django_db(transaction=True)
async def test_a_turn_calls_the_tool_and_a_hanging_one_fails_in_words(
    owner: Tenant, server: McpTestServer, llm: Any
) -> None:
    from tests.engine.providers.llm.openai import fake_server as fake_openai
    from tests.sessions_app.wsclient import Client

    def setup() -> None:
        connection = _connect(owner, server)
        agent = agent_services.agent_create(workspace=owner.workspace, name="Desk", slug="desk")
        services.agent_mcp_tools_set(
            agent=agent,
            tools=[
                {"server": str(connection.uid), "tool": "add"},
                {"server": str(connection.uid), "tool": "hang", "timeout_ms": 300},
            ],
        )

    await sync_to_async(setup)()
    llm.script(
        *fake_openai.tool_call(0, "call_1", "add", '{"a": 1, "b": 2}'),
        *fake_openai.tool_call(1, "call_2", "hang", "{}"),
        fake_openai.Finish("tool_calls"),
        fake_openai.Done(),
    )
    llm.script(fake_openai.text_reply("Three; the other system is not answering."))
    async with Client(f"/v1/session?key={owner.publishable_key}") as client:
        await client.send({"type": "configure", "agent": "desk", "mode": "text"})
        await client.until("ready")
        await client.send({"type": "text", "text": "Add one and two, and check the other."})
        chat = await client.until("chat")
        await client.until("metrics")
    offered = sorted(tool["function"]["name"] for tool in llm.requests[0].json["tools"])
    assert offered == ["add", "hang"]
    results = {
        m["tool_call_id"]: json.loads(m["content"])
        for m in llm.requests[1].json["messages"]
        if m["role"] == "tool"
    }
    assert results["call_1"] == {"sum": 3.0}
    assert results["call_2"]["error"] == "The tool server 'crm' did not answer within 0.3 s."
    assert chat["text"] == "Three; the other system is not answering."


@pytest.mark.usefixtures("no_leases")
@pytest.mark.django_db(transaction=True)
async def test_a_slow_mcp_tool_in_a_voice_turn_says_the_agents_filler_first(
    owner: Tenant, server: McpTestServer, llm: Any
) -> None:
    from tests.engine.providers.llm.openai import fake_server as fake_openai
    from tests.sessions_app.wsclient import Client

    def setup() -> None:
        connection = _connect(owner, server)
        agent = agent_services.agent_create(
            workspace=owner.workspace, name="Desk", slug="desk",
            tool_filler="Let me look that up.", tool_filler_after_ms=200,
        )  # fmt: skip
        services.agent_mcp_tools_set(
            agent=agent, tools=[{"server": str(connection.uid), "tool": "slow"}]
        )

    await sync_to_async(setup)()
    llm.script(
        *fake_openai.tool_call(0, "call_1", "slow", '{"seconds": 1.0}'),
        fake_openai.Finish("tool_calls"),
        fake_openai.Done(),
    )
    llm.script(fake_openai.text_reply("Done sleeping."))
    async with Client(f"/v1/session?key={owner.publishable_key}") as client:
        await client.send({"type": "configure", "agent": "desk", "mode": "voice"})
        await client.until("ready")
        await client.send({"type": "text", "text": "Take a nap."})
        chat = await client.until("chat", timeout=10)
        await client.until("tts_done")
    deltas = [e["text"].strip() for e in client.events if e["type"] == "chat_delta"]
    statuses = [(e["type"], e.get("status")) for e in client.events if e["type"] == "tool_status"]
    assert deltas[0] == "Let me look that up." and "Done sleeping." in "".join(deltas)
    assert statuses == [("tool_status", "started"), ("tool_status", "completed")]
    order = [e["type"] for e in client.events if e["type"] in ("chat_delta", "tool_status")]
    assert order[:3] == ["tool_status", "chat_delta", "tool_status"]  # said while it ran
    assert chat["text"] == "Done sleeping." and client.audio
