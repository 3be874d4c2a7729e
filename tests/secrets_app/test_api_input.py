"""Bad input gets a 400 whose message names the field; nothing is stored."""

from __future__ import annotations

import pytest

from secrets_app.models import Secret

BIG = "x" * (64 * 1024 + 1)


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/api/v1/secrets", {"name": "lower_case", "value": "v"}, "name"),
        ("/api/v1/secrets", {"name": "1ABC", "value": "v"}, "name"),
        ("/api/v1/secrets", {"name": "A" * 65, "value": "v"}, "name"),
        ("/api/v1/secrets", {"name": "OK_NAME", "value": BIG}, "value"),
        ("/api/v1/secrets", {"name": "OK_NAME", "value": ""}, "value"),
        ("/api/v1/secrets", {"name": "OK_NAME", "value": "v", "colour": "red"}, "colour"),
        (
            "/api/v1/secrets",
            {"name": "OK_NAME", "value": "v", "allowed_hosts": ["http://x.com/a"]},
            "allowed_hosts",
        ),
        ("/api/v1/keys", {"kind": "root"}, "kind"),
        (
            "/api/v1/keys",
            {"kind": "publishable", "allowed_origins": ["example.com"]},
            "allowed_origins",
        ),
        (
            "/api/v1/keys",
            {"kind": "publishable", "allowed_origins": ["https://a.com/path"]},
            "allowed_origins",
        ),
        ("/api/v1/keys", {"kind": "secret", "admin": True}, "admin"),
        ("/api/v1/agents", {"name": "A", "slug": "Not A Slug"}, "slug"),
        ("/api/v1/agents", {"name": "A", "slug": "a", "mode": "video"}, "mode"),
        (
            "/api/v1/agents",
            {"name": "A", "slug": "a", "tools": [{"name": "bad name"}]},
            "tools[0].name",
        ),
        (
            "/api/v1/agents",
            {"name": "A", "slug": "a", "tools": [{"name": "t", "handler": "x", "client": True}]},
            "tools[0]",
        ),
        (
            "/api/v1/agents",
            {
                "name": "A",
                "slug": "a",
                "tools": [{"name": "t", "client": True, "parameters": {"city": "strng"}}],
            },
            "city",
        ),
        (
            "/api/v1/agents",
            {"name": "A", "slug": "a", "instructions": "x" * (16 * 1024 + 1)},
            "instructions",
        ),
    ],
)
def test_bad_input_names_the_field(owner_api, url, body, field):
    response = owner_api.post(url, body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["message"], error


def test_duplicate_tool_names_are_refused(owner_api):
    tool = {"name": "t", "client": True}
    response = owner_api.post(
        "/api/v1/agents", {"name": "A", "slug": "a", "tools": [tool, tool]}, format="json"
    )
    assert response.status_code == 400
    assert "tools[1].name" in response.json()["error"]["message"]


def test_malformed_json_is_a_clear_400(owner_api):
    response = owner_api.generic(
        "POST", "/api/v1/secrets", '{"name": "A", "value": ', content_type="application/json"
    )
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]["message"]
    assert Secret.objects.count() == 0


def test_non_object_body_is_refused(owner_api):
    response = owner_api.post("/api/v1/secrets", ["A", "b"], format="json")
    assert response.status_code == 400


def test_duplicate_agent_slug_is_a_400(owner_api):
    assert (
        owner_api.post("/api/v1/agents", {"name": "A", "slug": "a"}, format="json").status_code
        == 201
    )
    response = owner_api.post("/api/v1/agents", {"name": "B", "slug": "a"}, format="json")
    assert response.status_code == 400
    assert "slug" in response.json()["error"]["message"]
