"""The OpenAPI schema matches every response: schemathesis generates requests from the
schema for every operation (a bounded number each, so CI stays short), sends them to the
real Django app, and checks that nothing answers 500 and that every status code, content
type and body is the one the schema documents (errors, pagination and required fields
included)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given
from hypothesis import settings as fuzz_settings
from schemathesis import GenerationMode, checks

from sessions_app import services as agent_services
from tests.factories import Tenant, order_tool

EXAMPLES = 12  # per operation
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


@pytest.fixture
def api_schema(owner: Tenant, settings: Any) -> Iterator[Any]:
    settings.API_REQUESTS_PER_MINUTE = 100_000
    agent_services.agent_create(
        workspace=owner.workspace, name="Orders", slug="orders", tools=[order_tool()]
    )
    # Like Django's test client: the requests run inside the test's transaction, whose
    # connection a finished request must not close.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.mark.parametrize(
    ("mode", "checked"),
    [
        (GenerationMode.POSITIVE, CHECKS),
        # Requests the schema forbids (wrong types, NUL, huge numbers, missing fields) must be
        # refused with a documented error, never a 500.
        (GenerationMode.NEGATIVE, CHECKS),
    ],
)
def test_every_response_matches_the_schema(
    owner: Tenant, api_schema: Any, mode: GenerationMode, checked: list[Any]
) -> None:
    headers = {"Authorization": f"Bearer {owner.secret_key}"}
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 20
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @fuzz_settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any) -> None:
            case.call_and_validate(headers=headers, checks=checked)

        check()


def test_unknown_api_routes_and_ids_answer_json(owner_api: Any) -> None:
    for path in (
        "/api/v1/nope",
        "/api/v1/keys/99999999999999999999999999",
        "/api/v1/keys/abc",
        "/api/v1/sessions/not-a-uuid",
        "/api/nothing/here",
    ):
        response = owner_api.get(path)
        assert response.status_code == 404, path
        assert response["Content-Type"] == "application/json", path
        assert response.json()["error"]["code"] == "not_found", path


def test_nul_and_huge_ids_are_not_found_not_a_crash(owner_api: Any) -> None:
    assert owner_api.get("/api/v1/secrets/A%00B").status_code == 404
    assert owner_api.delete("/api/v1/secrets/%00").status_code == 404
    assert owner_api.get("/api/v1/keys/999999999999999999").status_code == 404
    bad = owner_api.post("/api/v1/secrets", {"name": "A\x00", "value": "v"}, format="json")
    assert bad.status_code == 400
    tools = [{**order_tool(), "description": "nul \x00 here"}]
    bad = owner_api.post(
        "/api/v1/agents", {"name": "N", "slug": "n", "tools": tools}, format="json"
    )
    assert bad.status_code == 400 and "NUL" in bad.json()["error"]["message"]
