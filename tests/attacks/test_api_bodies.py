"""Attacks on every REST operation that takes a JSON body, now regressions.

- A body nested thousands of levels deep (a few KB of brackets, far under the 1 MB body
  cap). Before: every such operation answered 500 (Python's parser raises RecursionError
  past about a thousand levels, which DRF does not read as a parse error), and bodies a
  little shallower still answered 500 where a check walked them recursively (an agent
  test's `tool_results`, a tool's `parameters` at 900 levels). Now a body nesting more
  than 100 levels is refused as a parse error before anything walks it; the field checks
  below that (a tool's schema: 64) still name the field.
- A lone UTF-16 surrogate (`"\\ud800"`, valid JSON) in any string: before, 500 wherever the
  value was stored or sealed (a secret's value) and wherever a refusal quoted it back
  (`kind`, `carrier`, `scopes`, `mode`, `machine_detection`…: the answer itself could not
  be encoded). Now refused as a parse error, as the WebSocket refuses it.
- A NUL in an agent's analysis criteria or field descriptions: a 500 (jsonb), now a 400.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.parsers import JSON_BODY_MAX_DEPTH, LONE_SURROGATE
from sessions_app import services as agent_services
from tests.conftest import api_client
from tests.factories import Tenant, order_tool
from tests.test_openapi import _concrete, _schema_operations

pytestmark = pytest.mark.django_db

TOO_DEEP = f"the body nests more than {JSON_BODY_MAX_DEPTH} levels deep"


def _nested(depth: int) -> str:
    """An object ``depth`` levels deep: {"a": {"a": … 1 …}}."""
    return '{"a":' * (depth - 1) + '{"a":1' + "}" * depth


@pytest.mark.parametrize(
    ("body", "refusal"),
    [
        (_nested(JSON_BODY_MAX_DEPTH + 1), TOO_DEEP),
        (_nested(995), TOO_DEEP),
        (_nested(5000), TOO_DEEP),
        (_nested(100_000), TOO_DEEP),
        ('{"name": "Desk \\ud800", "value": "x"}', LONE_SURROGATE),
        ('{"kind": "\\udfff"}', LONE_SURROGATE),
        ('{"tools": [{"\\ud83d": 1}]}', LONE_SURROGATE),  # a key, half an emoji
    ],
    ids=["101", "995", "5000", "100000", "surrogate", "low-surrogate", "surrogate-key"],
)
def test_every_json_operation_refuses_what_it_could_not_handle(
    owner: Tenant, settings: Any, body: str, refusal: str
) -> None:
    settings.API_REQUESTS_PER_MINUTE = 100_000
    agent_services.agent_create(
        workspace=owner.workspace, name="Orders", slug="orders", tools=[order_tool()]
    )
    client = api_client(owner.secret_key)
    client.raise_request_exception = False
    refused = 0
    for method, path, _scope in _schema_operations(api_client(None)):
        if method not in ("POST", "PUT", "PATCH") or path.endswith("/documents"):
            continue  # the upload route takes a file (its JSON form is the URL one: same parser)
        answer = getattr(client, method.lower())(
            _concrete(path, owner), body, content_type="application/json"
        )
        assert answer.status_code < 500, (method, path, answer.content[:200])
        error = answer.json().get("error", {})
        if error.get("code") == "parse_error":
            assert refusal in error["message"], (method, path)
            refused += 1
        else:  # one that reads no body (revoke, roll…), or an id _concrete made up
            assert answer.status_code < 300 or error["code"] == "not_found", (method, path)
    assert refused >= 25


def test_a_body_within_the_depth_is_judged_field_by_field(owner: Tenant) -> None:
    """Below the ceiling, the checks that walk a value recursively answer for their field."""
    agent_services.agent_create(workspace=owner.workspace, name="Orders", slug="orders")
    client = api_client(owner.secret_key)
    deep_results = '{"name": "t", "turns": [{"user": "Hi"}], "tool_results": {"x": %s}}'
    saved = client.post(
        "/api/v1/agents/orders/tests",
        deep_results % _nested(JSON_BODY_MAX_DEPTH - 2),
        content_type="application/json",
    )
    assert saved.status_code == 201, saved.content[:200]
    parameters = {"type": "object", "properties": {"a": {"x": 1}}}
    node = parameters["properties"]["a"]
    for _ in range(80):
        node["x"] = {"x": 1}
        node = node["x"]
    tool = {**order_tool(), "parameters": parameters}
    refused = client.post(
        "/api/v1/agents", {"name": "Deep", "slug": "deep", "tools": [tool]}, format="json"
    )
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert "tools[0].parameters: nested more than 64 levels deep" in message


def test_a_surrogate_pair_is_one_character_and_welcome(owner: Tenant) -> None:
    body = '{"name": "Key \\ud83d\\udd11", "slug": "key", "instructions": "Say \\ud83d\\udd11."}'
    saved = api_client(owner.secret_key).post(
        "/api/v1/agents", body, content_type="application/json"
    )
    assert saved.status_code == 201, saved.content[:200]
    assert saved.json()["name"] == "Key \U0001f511"


def test_a_nul_in_an_analysis_description_is_refused_by_name(owner: Tenant) -> None:
    analysis = {"criteria": [{"name": "solved", "description": "Was it \x00 solved?"}]}
    refused = api_client(owner.secret_key).post(
        "/api/v1/agents", {"name": "A", "slug": "a", "analysis": analysis}, format="json"
    )
    assert refused.status_code == 400
    assert "criteria[0].description: no NUL characters" in refused.json()["error"]["message"]
