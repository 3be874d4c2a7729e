"""The REST API: a knowledge base made, a document uploaded and indexed, searched, attached
to an agent; the outsider sees and touches none of it."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge_app import dispatch
from secrets_app.models import AuditEvent
from sessions_app import services as agent_services
from tests.factories import Tenant
from tests.knowledge_app import documents

pytestmark = pytest.mark.django_db(transaction=True)


def _made(owner_api: Any) -> tuple[str, str]:
    base = owner_api.post("/api/v1/knowledge-bases", {"name": "Civics"}, format="json")
    assert base.status_code == 201, base.content
    upload = SimpleUploadedFile("gettysburg.txt", documents.corpus("gettysburg.txt"), "text/plain")
    document = owner_api.post(
        f"/api/v1/knowledge-bases/{base.json()['id']}/documents",
        {"file": upload},
        format="multipart",
    )
    assert document.status_code == 201, document.content
    assert document.json()["status"] == "pending"
    dispatch.wait_idle()
    return base.json()["id"], document.json()["id"]


def test_upload_index_search_and_attach(owner: Tenant, owner_api: Any) -> None:
    base_id, document_id = _made(owner_api)
    document = owner_api.get(f"/api/v1/knowledge-bases/{base_id}/documents/{document_id}").json()
    assert (document["status"], document["progress"], document["kind"]) == ("ready", 100, "text")
    found = owner_api.post(
        f"/api/v1/knowledge-bases/{base_id}/search", {"query": "four score", "k": 2}, format="json"
    ).json()
    assert "Four score" in found[0]["text"] and found[0]["source"].startswith("K")
    agent_services.agent_create(workspace=owner.workspace, name="Civics", slug="civics")
    attached = owner_api.put(
        "/api/v1/agents/civics/knowledge", {"knowledge_bases": [base_id], "mode": "prefetch"},
        format="json",
    )  # fmt: skip
    assert attached.json() == {"knowledge_bases": [base_id], "mode": "prefetch"}
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {
        "knowledge_base.created",
        "knowledge_document.uploaded",
        "agent.knowledge_changed",
    } <= actions


def test_a_file_and_a_url_together_or_neither_are_refused(owner_api: Any) -> None:
    base = owner_api.post("/api/v1/knowledge-bases", {"name": "B"}, format="json").json()
    neither = owner_api.post(
        f"/api/v1/knowledge-bases/{base['id']}/documents", {}, format="multipart"
    )
    assert neither.status_code == 400 and neither.json()["error"]["code"] == "invalid"


def test_the_outsider_sees_and_touches_nothing(
    owner: Tenant, owner_api: Any, outsider: Tenant, outsider_api: Any
) -> None:
    base_id, document_id = _made(owner_api)
    assert outsider_api.get("/api/v1/knowledge-bases").json() == []
    for method, path, body in [
        ("get", f"/api/v1/knowledge-bases/{base_id}", None),
        ("delete", f"/api/v1/knowledge-bases/{base_id}", None),
        ("get", f"/api/v1/knowledge-bases/{base_id}/documents", None),
        ("get", f"/api/v1/knowledge-bases/{base_id}/documents/{document_id}", None),
        ("delete", f"/api/v1/knowledge-bases/{base_id}/documents/{document_id}", None),
        ("post", f"/api/v1/knowledge-bases/{base_id}/documents/{document_id}/refresh", {}),
        ("post", f"/api/v1/knowledge-bases/{base_id}/search", {"query": "four score"}),
    ]:
        args = (body,) if body is not None else ()
        answer = getattr(outsider_api, method)(path, *args, format="json")
        assert answer.status_code == 404, (method, path)
    agent_services.agent_create(workspace=outsider.workspace, name="Thief", slug="thief")
    refused = outsider_api.put(
        "/api/v1/agents/thief/knowledge", {"knowledge_bases": [base_id]}, format="json"
    )
    assert refused.status_code == 400
    assert owner_api.get(f"/api/v1/knowledge-bases/{base_id}").json()["documents"] == 1
