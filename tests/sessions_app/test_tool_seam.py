"""The tool seam: every kind takes a ToolRequest and gives a ToolResult, a new kind is one
class registered once, and results cross processes only as their wire form."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest

from core.channel_messages import (
    SessionEnd,
    SessionHandover,
    SessionKeyExpires,
    ToolResultDelivery,
    decode,
    encode,
)
from engine.protocol import ToolStatus
from engine.session import ToolDefinition
from engine.tools import kinds
from engine.tools.call import ToolRequest, ToolResult
from engine.tools.runner import ToolRunner
from tests.engine.providers.fake import FakeLLM, tool_call
from tests.sessions_app.harness import Harness, started


class LookupTools(ToolRunner):
    """A kind of its own (as knowledge search or a system tool would be)."""

    kind: ClassVar[str] = "lookup"
    requests: ClassVar[list[ToolRequest]] = []

    async def run(self, request: ToolRequest) -> ToolResult:
        self.requests.append(request)
        return ToolResult(ToolStatus.COMPLETED, result=json.dumps({"found": request.arguments}))


@pytest.fixture
def lookup_kind() -> Iterator[type[LookupTools]]:
    LookupTools.requests = []
    kinds.register(LookupTools.kind, lambda _tools: LookupTools())
    yield LookupTools
    kinds.unregister(LookupTools.kind)


async def test_a_registered_kind_runs_its_tools_and_the_llm_gets_the_result(
    make: Callable[..., Harness], lookup_kind: type[LookupTools]
) -> None:
    llm = FakeLLM(script=[[tool_call("find", {"q": "hours"}, id="c1")], ["Open at nine."]])
    tool = ToolDefinition(
        name="find",
        kind="lookup",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
    )
    harness = await started(make, llm=llm, tools=[tool])
    await harness.say("when are you open?")
    await harness.wait_for("chat")
    (request,) = lookup_kind.requests
    assert (request.kind, request.name, request.arguments) == ("lookup", "find", {"q": "hours"})
    assert [e["status"] for e in harness.of_type("tool_status")] == ["started", "completed"]
    assert harness.runner.invocations == []  # not the sandbox's
    tool_message = next(m for m in harness.session.history if m.get("role") == "tool")
    assert json.loads(tool_message["content"]) == {"found": {"q": "hours"}}


async def test_a_kind_nobody_registered_fails_the_call_clearly(
    make: Callable[..., Harness],
) -> None:
    llm = FakeLLM(script=[[tool_call("find", {}, id="c1")], ["Sorry."]])
    harness = await started(make, llm=llm, tools=[ToolDefinition(name="find", kind="mcp")])
    await harness.say("find it")
    await harness.wait_for("chat")
    assert harness.of_type("tool_status")[-1]["status"] == "failed"


def test_client_and_server_tools_get_their_kind() -> None:
    assert ToolDefinition(name="a", client=True).kind == kinds.BROWSER
    assert ToolDefinition(name="b", handler="async () => 1").kind == kinds.SANDBOX
    assert set(kinds.kinds()) >= {kinds.BROWSER, kinds.SANDBOX}


def test_a_request_and_a_result_survive_their_wire_form() -> None:
    request = ToolRequest(
        call_id="c1", workspace_id=3, name="get", arguments={"a": [1]}, timeout_s=2.5,
        session_id="s1", handler="async () => 1", pinned=True,
    )  # fmt: skip
    assert ToolRequest.from_wire(json.loads(json.dumps(request.to_wire()))) == request
    result = ToolResult(ToolStatus.TIMED_OUT, error="slow", log="x", cpu_ms=3.5)
    delivered = decode(json.loads(json.dumps(encode(ToolResultDelivery("c1", result)))))
    assert delivered == ToolResultDelivery("c1", result)
    cited = ToolResult(ToolStatus.COMPLETED, result="{}", steps=("Source K3: a.md, passage 1",))
    assert ToolResult.from_wire(json.loads(json.dumps(cited.to_wire()))) == cited
    assert ToolResult.from_wire({**cited.to_wire(), "steps": [1, "ok"]}).steps == ("ok",)


@pytest.mark.parametrize(
    "hostile",
    [
        {"status": "started"},
        {"status": "exploded"},
        {"status": ["completed"]},
        {},
    ],
)
def test_a_result_that_makes_no_sense_is_a_failed_call(hostile: dict[str, Any]) -> None:
    result = ToolResult.from_wire({**hostile, "result": 5, "cpu_ms": "lots"})
    assert result.status is ToolStatus.FAILED
    assert result.result is None and result.cpu_ms == 0.0


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"type": "session.end", "reason": "key_revoked"}, SessionEnd("key_revoked")),
        ({"type": "session.end", "reason": "whatever"}, SessionEnd("ended")),
        ({"type": "session.key_expires", "at": 12}, SessionKeyExpires(12.0)),
        ({"type": "session.key_expires", "at": "soon"}, None),
        ({"type": "session.key_expires", "at": True}, None),
        ({"type": "session.handover", "reply_channel": 5}, None),
        ({"type": "session.handover", "session_id": "s", "reply_channel": "r"},
         SessionHandover("s", "r")),
        ({"type": "tool.result", "status": "completed"}, None),  # no call id
        ({"type": "nobody.knows"}, None),
        ({}, None),
    ],
)  # fmt: skip
def test_channel_messages_decode_to_their_type_or_to_nothing(
    raw: dict[str, Any], message: object
) -> None:
    assert decode(raw) == message
