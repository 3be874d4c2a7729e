"""The OpenAPI schema matches every response: schemathesis generates requests from the
schema for every operation (a bounded number each, so CI stays short), sends them to the
real Django app, and checks that nothing answers 500 and that every status code, content
type and body is the one the schema documents (errors, pagination and required fields
included). The schema is also what Swagger UI shows a reader: every operation has a
summary, a description, one resource tag and examples, and the examples hold (they match
their schemas, and each request example, sent as it stands, succeeds)."""

from __future__ import annotations

import uuid
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

from knowledge_app import api_examples as knowledge_examples
from knowledge_app import services as knowledge_services
from knowledge_app.models import Document, KnowledgeBase
from sessions_app import services as agent_services
from tests.factories import Tenant, order_tool, phone_line
from tests.fakes.twilio_rest import FakeTwilioRest

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
# Twelve examples for each of 35 operations: past the default 120 s on a loaded machine.
@pytest.mark.timeout(360)
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


# ---------------------------------------------------------------- every operation's scope


def _schema_operations(client: Any) -> list[tuple[str, str, str]]:
    """(METHOD, path template, scope) for every operation of the published schema."""
    schema = client.get("/api/schema/?format=json").json()
    found = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert "x-scope" in operation, f"{method.upper()} {path} names no scope"
            found.append((method.upper(), path, operation["x-scope"]))
    return found


def _only_example(answer: dict[str, Any]) -> Any:
    (example,) = answer["content"]["application/json"]["examples"].values()
    return example["value"]


def _keys_around(owner: Tenant, scope: str) -> tuple[str, str]:
    """A key that holds every scope but ``scope`` (and those that include it), and one
    that holds ``scope`` alone."""
    from secrets_app import scopes
    from secrets_app import services as key_services
    from secrets_app.models import ApiKey

    lacking = [s for s in scopes.ALL if not scopes.grants([s], scope)]
    made = []
    for chosen in (lacking, [scope]):
        _, plaintext = key_services.api_key_create(
            workspace=owner.workspace, kind=ApiKey.Kind.SECRET, scopes=chosen
        )
        made.append(plaintext)
    return made[0], made[1]


def _concrete(path: str, owner: Tenant) -> str:
    """The path with real ids of the workspace: a publishable key (rolling or revoking it
    needs no scope of the caller's), a secret, the agent, a carrier account and a number of
    an agent of its own; a session id and a call id that do not exist
    (a 404 comes after the scope check, so it counts as let through)."""
    from secrets_app import services as key_services
    from secrets_app.models import ApiKey

    key, _ = key_services.api_key_create(workspace=owner.workspace, kind=ApiKey.Kind.PUBLISHABLE)
    line_agent = f"line-{uuid.uuid4().hex[:8]}"
    agent_services.agent_create(workspace=owner.workspace, name="Line", slug=line_agent)
    number = f"+1415{uuid.uuid4().int % 10**7:07d}"
    account, phone = phone_line(owner.workspace, line_agent, number=number)
    return (
        path.replace("{key_id}", str(key.pk))
        .replace("{account_id}", str(account.pk))
        .replace("{number_id}", str(phone.pk))
        .replace("{call_id}", "999999999")
        .replace("{name}", "SHOP_KEY")
        .replace("{slug}", "orders")
        .replace("{version}", "1")
        .replace("{session_id}", "00000000-0000-4000-8000-000000000000")
        .replace("{run_id}", "00000000-0000-4000-8000-000000000000")
        .replace("{knowledge_base_id}", "00000000-0000-4000-8000-000000000000")
        .replace("{document_id}", "00000000-0000-4000-8000-000000000000")
    )


def test_every_operation_refuses_a_key_without_its_scope(
    owner: Tenant, api_schema: Any, settings: Any
) -> None:
    from secrets_app import services as key_services
    from tests.conftest import api_client

    key_services.secret_set(workspace=owner.workspace, name="SHOP_KEY", value="v")
    operations = _schema_operations(api_client(None))
    documented_refusals = {
        where: _only_example(operation["responses"]["403"])
        for where, operation in _each_operation(_published_schema())
    }
    assert len(operations) >= 24
    for method, path, scope in operations:
        lacking, holding = _keys_around(owner, scope)
        url = _concrete(path, owner)
        send = {"format": "json"} if method in ("POST", "PUT", "PATCH") else {}
        body = ({},) if send else ()
        refused = getattr(api_client(lacking), method.lower())(url, *body, **send)
        assert refused.status_code == 403, (method, path, refused.content)
        assert refused.json()["error"]["code"] == "missing_scope", (method, path)
        assert repr(scope) in refused.json()["error"]["message"]
        assert refused.json() == documented_refusals[f"{method} {path}"], "not as documented"
        let_through = getattr(api_client(holding), method.lower())(url, *body, **send)
        assert let_through.status_code not in (401, 403), (method, path, let_through.content)


def test_the_docs_list_every_operation_with_its_scope(db: None) -> None:
    from pathlib import Path

    from django.conf import settings as django_settings

    from tests.conftest import api_client

    root = Path(django_settings.BASE_DIR)
    docs = "\n".join(
        path.read_text() for path in [root / "README.md", *sorted(root.glob("docs/*.md"))]
    )
    for method, path, scope in _schema_operations(api_client(None)):
        row = f"| `{method} {path.removeprefix('/api/v1/')}` | `{scope}` |"
        assert row in docs, f"the scope table lacks {row}"


# ---------------------------------------------------------------- what a reader of the schema gets


def _published_schema() -> dict[str, Any]:
    from tests.conftest import api_client

    schema: dict[str, Any] = api_client(None).get("/api/schema/?format=json").json()
    return schema


def _each_operation(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            yield f"{method.upper()} {path}", operation


def _json_bodies(operation: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """("request" or the status, the application/json media object) of each body the
    operation takes or answers with; error answers only where they carry examples."""
    request_body = operation.get("requestBody", {}).get("content", {})
    if "application/json" in request_body:
        yield "request", request_body["application/json"]
    for status, answer in operation["responses"].items():
        media = answer.get("content", {}).get("application/json")
        if media is not None and (status.startswith("2") or "examples" in media):
            yield status, media


def test_every_operation_has_a_summary_a_description_a_tag_and_examples(db: None) -> None:
    """What Swagger UI shows a reader: each operation under its resource's tag (one of the
    declared tags, each with a description), a summary of its own, a description beyond the
    scope sentence, and an example of every JSON body it takes or answers with."""
    schema = _published_schema()
    tags = {tag["name"]: tag.get("description", "") for tag in schema.get("tags", [])}
    assert all(tags.values()), f"tags without a description: {tags}"
    used, summaries = set(), set()
    for where, operation in _each_operation(schema):
        summary = operation.get("summary", "").strip()
        assert summary, f"{where} has no summary"
        assert summary not in summaries, f"{where} repeats the summary {summary!r}"
        summaries.add(summary)
        needs = f"Needs a secret key with the scope `{operation['x-scope']}`."
        description = operation.get("description", "")
        assert needs in description, f"{where}: the description does not name its scope"
        assert description.replace(needs, "").strip(), f"{where} has no description"
        assert len(operation.get("tags", [])) == 1, f"{where} has tags {operation.get('tags')}"
        assert operation["tags"][0] in tags, f"{where}: {operation['tags'][0]!r} is not declared"
        used.add(operation["tags"][0])
        for status, media in _json_bodies(operation):
            assert media.get("examples"), f"{where}: the {status} body has no example"
    assert used == set(tags), f"declared but unused tags: {set(tags) - used}"


def _as_json_schema(node: Any) -> Any:
    """An OpenAPI 3.0 schema as JSON Schema: ``nullable`` allows null; an object with
    properties has no others (so an example with a stale or misspelt field fails)."""
    if isinstance(node, list):
        return [_as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: _as_json_schema(value) for key, value in node.items()}
    if "properties" in converted:
        converted.setdefault("additionalProperties", False)
    if converted.pop("nullable", False):
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


def _validator(schema: dict[str, Any], body_schema: dict[str, Any]) -> Any:
    from jsonschema import Draft4Validator

    components = _as_json_schema(schema["components"])
    root = {"components": components, **_as_json_schema(body_schema)}
    return Draft4Validator(root, format_checker=Draft4Validator.FORMAT_CHECKER)


def test_every_example_matches_its_schema(db: None) -> None:
    schema = _published_schema()
    checked = 0
    for where, operation in _each_operation(schema):
        for status, media in _json_bodies(operation):
            validator = _validator(schema, media["schema"])
            for name, example in media.get("examples", {}).items():
                errors = [
                    f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
                    for error in validator.iter_errors(example["value"])
                ]
                assert not errors, f"{where}, {status} example {name!r}: {errors}"
                checked += 1
    assert checked >= 30


def _workspace_for(where: str, body: dict[str, Any]) -> tuple[Tenant, str]:
    """A new workspace holding what the example's path and body name: the agent `support`,
    the secret `ORDERS_KEY`, a publishable key. The concrete path comes back."""
    from secrets_app import services as key_services
    from secrets_app.models import ApiKey
    from tests.factories import make_tenant

    path = where.split(" ")[1]
    tenant = make_tenant(f"{uuid.uuid4().hex[:12]}@example.com")
    key_services.secret_set(workspace=tenant.workspace, name="ORDERS_KEY", value="v")
    phone_named = any(name in path for name in ("{account_id}", "{number_id}")) or any(
        name in body for name in ("account", "from")
    )
    if "{slug}" in path or "agent" in body or phone_named:
        agent_services.agent_create(workspace=tenant.workspace, name="Support", slug="support")
    if "{knowledge_base_id}" in path or "knowledge_bases" in body:
        KnowledgeBase.objects.filter(uid=knowledge_examples.BASE_ID).delete()  # the last example's
        KnowledgeBase.objects.create(
            workspace=tenant.workspace, name="Help center", uid=knowledge_examples.BASE_ID
        )
    if "connection" in body:  # a knowledge base's embedding model, by its connection's name
        knowledge_services.embedding_connection_set(
            workspace=tenant.workspace, name=body["connection"], base_url="https://example.com/v1",
            model="text-embedding-3-small",
        )  # fmt: skip
    if "{document_id}" in path:
        Document.objects.filter(uid=knowledge_examples.DOCUMENT_ID).delete()
        Document.objects.create(
            workspace=tenant.workspace, knowledge_base=KnowledgeBase.objects.get(
                uid=knowledge_examples.BASE_ID), uid=knowledge_examples.DOCUMENT_ID,
            title="shipping", kind="html", url="https://docs.example.com/shipping.html",
            content=b"<p>Shipping</p>", status="ready",
        )  # fmt: skip
    key, _ = key_services.api_key_create(workspace=tenant.workspace, kind=ApiKey.Kind.PUBLISHABLE)
    concrete = path.replace("{key_id}", str(key.pk))
    if phone_named:
        account, phone = phone_line(tenant.workspace, "support", number="+14155550199")
        concrete = concrete.replace("{account_id}", str(account.pk)).replace(
            "{number_id}", str(phone.pk)
        )
    concrete = (
        concrete.replace("{name}", "ORDERS_KEY")
        .replace("{slug}", "support")
        .replace("{knowledge_base_id}", knowledge_examples.BASE_ID)
        .replace("{document_id}", knowledge_examples.DOCUMENT_ID)
    )
    return tenant, concrete


def test_every_request_example_is_accepted_as_it_stands(
    transactional_db: None, settings: Any
) -> None:
    """Copied from the docs and sent, each request example does what it says: the
    documented success status, an answer that matches the schema. Outside a transaction,
    as a request runs: a task run in the request (embedded default) closes an old
    connection first, which inside the test's transaction would be the test's own."""
    from tests.conftest import api_client

    settings.TTS_PROVIDER = "local"  # the platform's default, whose voice the examples name
    twilio = FakeTwilioRest().__enter__()  # where POST calls places its call
    settings.TWILIO_API_URL, settings.DEV_ALLOW_PRIVATE_EGRESS = twilio.url, True
    schema = _published_schema()
    sent = 0
    for where, operation in _each_operation(schema):
        media = operation.get("requestBody", {}).get("content", {}).get("application/json")
        for name, example in (media or {}).get("examples", {}).items():
            tenant, path = _workspace_for(where, example["value"])
            send = getattr(api_client(tenant.secret_key), where.split(" ")[0].lower())
            answer = send(path, example["value"], format="json")
            documented = operation["responses"].get(str(answer.status_code))
            assert answer.status_code < 300 and documented, (where, name, answer.content)
            body_schema = documented["content"]["application/json"]["schema"]
            errors = [e.message for e in _validator(schema, body_schema).iter_errors(answer.json())]
            assert not errors, (where, name, errors)
            sent += 1
    twilio.__exit__()
    assert sent >= 10
