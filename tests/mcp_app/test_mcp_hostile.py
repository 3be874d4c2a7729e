"""A hostile MCP server (``hostile_mcp``: every byte it answers is the test's): what it
echoes, names, nests and withholds stays out of records, pages, the LLM and the logs."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

import egress
from engine.protocol import ToolStatus
from mcp_app import connection, services
from secrets_app.services import secret_set
from tests.factories import Tenant
from tests.mcp_app.conftest import HOST
from tests.mcp_app.hostile_mcp import HostileServer
from tests.mcp_app.test_mcp import _agent, _call, _config

pytestmark = pytest.mark.usefixtures("loopback_allowed")
TOKEN = "tok-4f1c9e2a7b3d"  # also a valid LLM tool name, as many tokens are
LOOP = {"type": "object", "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
        "properties": {"x": {"$ref": "#/$defs/A"}}}  # fmt: skip


def _token(headers: dict[str, str]) -> str:
    return headers.get("authorization", "").removeprefix("Bearer ")


def _one_tool(name: str, schema: Any = None) -> Any:
    def answer(method: str, params: Any, headers: dict[str, str]) -> Any:
        if method == "tools/list":
            return {"tools": [{"name": name, "inputSchema": schema or {"type": "object"}}]}
        return {"content": [{"type": "text", "text": "done"}]}

    return answer


def _echoing_list(method: str, params: Any, headers: dict[str, str]) -> Any:
    """A server that puts the credential it was sent into every part of its tool list."""
    tok = _token(headers)
    if method == "tools/list":
        prop = {"type": "string", "description": f"use {tok}", "default": tok, "enum": [tok, "x"]}
        schema = {"type": "object", "title": tok, "properties": {tok: prop, "plain": prop}}
        return {
            "tools": [
                {"name": tok, "description": "d", "inputSchema": {"type": "object"}},
                {"name": "lookup", "description": f"key {tok}", "inputSchema": schema},
            ]
        }
    return {"content": [{"type": "text", "text": "ok"}]}


@pytest.fixture
def hostile() -> Iterator[Any]:
    servers: list[HostileServer] = []

    def make(answer: Any = _echoing_list, **kwargs: Any) -> HostileServer:
        server = HostileServer(answer, **kwargs).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def _connect(tenant: Tenant, server: HostileServer, **kwargs: Any) -> Any:
    secret_set(workspace=tenant.workspace, name="CRM_TOKEN", value=TOKEN, allowed_hosts=[HOST])
    return services.mcp_server_create(
        workspace=tenant.workspace, name=kwargs.pop("name", "crm"),
        url=kwargs.pop("url", f"http://{HOST}:{server.port}/mcp"),
        headers=[{"name": "Authorization", "value": "Bearer {{secret:CRM_TOKEN}}"}], **kwargs,
    )  # fmt: skip


# --- a secret echoed into the tool list ----------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_secret_echoed_into_the_tool_list_is_never_stored_shown_or_offered(
    owner: Tenant, owner_api: APIClient, hostile: Any
) -> None:
    server = hostile()
    conn = _connect(owner, server)
    assert _token(server.seen[-1][2]) == TOKEN  # the server got it (its own host)
    shown = owner_api.get(f"/api/v1/mcp-servers/{conn.uid}").content.decode()
    assert TOKEN not in json.dumps(conn.tools) and TOKEN not in shown
    named, lookup = conn.tools
    assert named["name"] == "[secret CRM_TOKEN]" and "holds a secret value" in named["problem"]
    assert lookup["problem"] == ""
    assert "[secret CRM_TOKEN]" in lookup["input_schema"]["properties"]
    tool = next(t for t in _config(_agent(owner, conn, "lookup")).tools if t.name == "lookup")
    offered = json.dumps({"description": tool.description, "parameters": tool.parameters})
    assert TOKEN not in offered and "[secret CRM_TOKEN]" in offered


@pytest.mark.django_db(transaction=True)
def test_a_tool_named_with_a_secret_cannot_be_given_to_an_agent(
    owner: Tenant, hostile: Any
) -> None:
    conn = _connect(owner, hostile())
    with pytest.raises(Exception, match="cannot be offered"):
        _agent(owner, conn, "[secret CRM_TOKEN]")


# --- names ---------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_tool_names_with_control_characters_are_refused(owner: Tenant, hostile: Any) -> None:
    names = ["echo\n", "echo\r", "search_knowledge\n", "tab\t", "é"]

    def listing(method: str, params: Any, headers: dict[str, str]) -> Any:
        return {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in names]}

    conn = _connect(owner, hostile(listing))
    assert [t["name"] for t in conn.tools if not t["problem"]] == []


def _nul_named_over_api(owner_api: APIClient, hostile: Any) -> Any:
    """Connect, over the REST API, a server listing a tool named "ok\\u0000"."""
    server = hostile(_one_tool("ok\x00"))
    response = owner_api.post(
        "/api/v1/mcp-servers",
        {"name": "nul", "url": f"http://{HOST}:{server.port}/mcp"},
        format="json",
    )
    assert response.status_code == 201, response.content
    return response


@pytest.mark.django_db(transaction=True)
def test_a_nul_in_a_tool_name_is_a_problem_not_a_500(
    owner: Tenant, owner_api: APIClient, hostile: Any
) -> None:
    response = _nul_named_over_api(owner_api, hostile)
    tools = response.json()["tools"]
    assert tools[0]["name"] == "ok" and "not one an LLM can call" in tools[0]["problem"]
    refreshed = owner_api.post(f"/api/v1/mcp-servers/{response.json()['id']}/refresh")
    assert refreshed.status_code == 200, refreshed.content


# --- schemas -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_looping_and_deep_schemas_are_problems_at_listing(owner: Tenant, hostile: Any) -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(40):
        deep = {"type": "object", "properties": {"a": deep}}
    loop = _connect(owner, hostile(_one_tool("t", LOOP)), name="loop")
    nested = _connect(owner, hostile(_one_tool("t", deep)), name="deep")
    assert "loop back" in loop.tools[0]["problem"]
    assert "levels deep" in nested.tools[0]["problem"]


@pytest.mark.usefixtures("no_leases")
@pytest.mark.django_db(transaction=True)
async def test_a_cyclic_ref_schema_already_stored_fails_the_tool_not_the_turn(
    owner: Tenant, hostile: Any, llm: Any
) -> None:
    """A tool stored before the listing check (or any schema validation cannot cope
    with): the call fails with a sentence and the turn goes on."""
    from asgiref.sync import sync_to_async

    from mcp_app.models import McpServer
    from sessions_app import services as agent_services
    from tests.engine.providers.llm.openai import fake_server as fake_openai
    from tests.sessions_app.wsclient import Client

    server = hostile(_one_tool("loop"))

    def setup() -> None:
        conn = _connect(owner, server)
        McpServer.objects.filter(pk=conn.pk).update(
            tools=[{"name": "loop", "description": "", "input_schema": LOOP, "problem": ""}]
        )
        agent = agent_services.agent_create(workspace=owner.workspace, name="Desk", slug="desk")
        services.agent_mcp_tools_set(agent=agent, tools=[{"server": str(conn.uid), "tool": "loop"}])

    await sync_to_async(setup)()
    llm.script(*fake_openai.tool_call(0, "call_1", "loop", '{"x": "a"}'),
               fake_openai.Finish("tool_calls"), fake_openai.Done())  # fmt: skip
    llm.script(fake_openai.text_reply("Sorry, that did not work."))
    async with Client(f"/v1/session?key={owner.publishable_key}") as client:
        await client.send({"type": "configure", "agent": "desk", "mode": "text"})
        await client.until("ready")
        await client.send({"type": "text", "text": "Look it up."})
        chat = await asyncio.wait_for(client.until("chat"), 20)
    assert chat["text"] == "Sorry, that did not work."
    told = json.dumps(llm.requests[-1].json["messages"][-1])  # the tool's result, to the LLM
    assert "refers to itself" in told, told


# --- size and time -------------------------------------------------------------------------


def test_a_paged_tool_list_stops_at_its_byte_cap() -> None:
    """A server paging one ~900 kB tool per page for ever: the list is refused once the
    running total passes the cap, not after a hundred pages held in memory."""

    def paging(method: str, params: Any, headers: dict[str, str]) -> Any:
        tool = {"name": "t", "description": "x" * 900_000, "inputSchema": {"type": "object"}}
        return {"tools": [tool, {**tool, "description": "", "inputSchema": {
            "type": "object", "description": "y" * 900_000}}], "nextCursor": "more"}  # fmt: skip

    server = HostileServer(paging).start()
    seen = server.seen
    try:
        access = connection.ServerAccess(
            name="crm", url=f"http://127.0.0.1:{server.port}/mcp", transport="streamable_http",
            policy=egress.Policy(allow_private=True, ports=None), max_response_bytes=4_000_000,
        )  # fmt: skip
        with pytest.raises(connection.McpUnavailable, match="larger than 2000000 bytes"):
            asyncio.run(
                connection.tools_list(access, timeout_s=10, max_tools=100, max_bytes=2_000_000)
            )
        listed = asyncio.run(
            connection.tools_list(access, timeout_s=10, max_tools=1, description_max=100)
        )
    finally:
        server.stop()
    pages = [s for s in seen if s[0] == "POST"]
    assert len(pages) < 12, len(pages)  # initialize, a page or two, notifications
    assert len(listed) == 1 and len(listed[0].description) == 100


@pytest.mark.django_db(transaction=True)
def test_a_hanging_session_delete_keeps_the_answer(
    owner: Tenant, hostile: Any, settings: Any
) -> None:
    """A stateful server that never answers the DELETE closing its session: the list and a
    call it did answer are kept, without waiting for the rest of the deadline."""
    settings.MCP_LIST_TIMEOUT_S = 5
    started = time.monotonic()
    conn = _connect(owner, hostile(_one_tool("quick"), session_id="s1", hang_delete_s=30))
    assert conn.last_error == "" and conn.tools[0]["name"] == "quick", conn.last_error
    assert time.monotonic() - started < 3.5
    started = time.monotonic()
    config = _config(_agent(owner, conn, "quick", timeout_ms=5000))
    outcome = asyncio.run(_call(config, "quick", {}))
    assert outcome.status is ToolStatus.COMPLETED and "done" in outcome.result, outcome
    assert time.monotonic() - started < 3.5


# --- what reaches the logs -----------------------------------------------------------------


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    formatter = logging.Formatter()
    return "\n".join(
        f"{r.name} {r.getMessage()} {formatter.formatException(r.exc_info) if r.exc_info else ''}"
        for r in caplog.records
    )


@pytest.mark.django_db(transaction=True)
def test_a_secret_echoed_by_the_server_never_reaches_the_logs_at_info(
    owner: Tenant, hostile: Any, caplog: pytest.LogCaptureFixture, settings: Any
) -> None:
    """The server echoes the credential as its Mcp-Session-Id and in a malformed answer;
    the SDK would log both (INFO, ERROR with the body)."""
    caplog.set_level(logging.INFO)
    settings.MCP_LIST_TIMEOUT_S = 2

    def answer(method: str, params: Any, headers: dict[str, str]) -> Any:
        return json.dumps({"jsonrpc": "2.0", "id": 1, "result": 5, "x": _token(headers)}).encode()

    conn = _connect(owner, hostile(answer, session_from_token=True))
    assert conn.last_error  # it did fail, and was logged in our words
    assert "listing an MCP server's tools failed" in _logged(caplog)
    assert TOKEN not in _logged(caplog)


@pytest.mark.django_db(transaction=True)
def test_tool_arguments_never_reach_the_logs_at_debug(
    owner: Tenant, hostile: Any, caplog: pytest.LogCaptureFixture
) -> None:
    answer = _one_tool("note", {"type": "object", "properties": {"text": {"type": "string"}}})
    conn = _connect(owner, hostile(answer, session_from_token=True))
    config = _config(_agent(owner, conn, "note"))
    caplog.set_level(logging.DEBUG)
    outcome = asyncio.run(_call(config, "note", {"text": "quokkazanzibar"}))
    assert outcome.status is ToolStatus.COMPLETED, outcome
    logged = _logged(caplog)
    assert "quokkazanzibar" not in logged and TOKEN not in logged


@pytest.mark.django_db(transaction=True)
def test_an_answer_too_deep_to_read_is_a_problem_at_once(
    owner: Tenant, hostile: Any, settings: Any
) -> None:
    """A 150-level schema is past what the SDK parses: it said nothing and waited for the
    whole list timeout; now the refresh ends at once with a reason."""
    settings.MCP_LIST_TIMEOUT_S = 10
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(150):
        deep = {"type": "object", "properties": {"a": deep}}
    started = time.monotonic()
    conn = _connect(owner, hostile(_one_tool("t", deep)))
    assert time.monotonic() - started < 5
    assert "could not be read" in conn.last_error, conn.last_error


def test_a_tenants_own_tool_with_looping_refs_is_refused_when_saved() -> None:
    from sessions_app.agent_tools import AgentToolsInvalid, agent_tools_check
    from tests.factories import order_tool

    tool = order_tool(parameters=LOOP, client=True)
    del tool["handler"]  # a browser tool: no sandbox needed for the check
    with pytest.raises(AgentToolsInvalid, match="loop back"):
        agent_tools_check([tool])


@pytest.mark.postgres  # PostgreSQL's behaviour (NUL refused, row locks across threads)
@pytest.mark.django_db(transaction=True)
def test_a_list_the_database_refuses_is_kept_as_last_error_not_a_500(
    owner: Tenant, owner_api: APIClient, hostile: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever else in a list the database cannot hold (here: the NUL let through on
    purpose) leaves the connection saved with a reason."""
    monkeypatch.setattr(services, "storable", lambda text: text)
    response = _nul_named_over_api(owner_api, hostile)
    assert response.json()["last_error"] == services.UNSTORABLE_LIST
    assert response.json()["tools"] == []
