"""A workspace's knowledge limits hold when requests arrive at the same instant (counted
and written under the workspace's lock: on PostgreSQL 55 bases got through a limit of 50
and 21 documents a limit of 6), its documents' bytes together are capped, and a refresh
while a document is being indexed queues nothing more."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from knowledge_app import services
from knowledge_app.models import Document, KnowledgeBase
from secrets_app.models import Workspace
from tests.concurrency import at_once
from tests.factories import Tenant


def _attempt(work: Any) -> str:
    try:
        work()
    except ValidationError as refused:
        return refused.messages[0]
    return "made"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_knowledge_base_count_and_name_hold_under_simultaneous_creates(
    owner: Tenant, settings: Any
) -> None:
    settings.KNOWLEDGE_WORKSPACE_MAX_BASES = 5
    workspace_id = owner.workspace.pk

    def create(index: int, name: str) -> str:
        workspace = Workspace.objects.get(pk=workspace_id)
        return _attempt(lambda: services.knowledge_base_create(workspace=workspace, name=name))

    same = at_once(lambda i: create(i, "Manuals"), 20)
    assert same.count("made") == 1
    assert set(same) - {"made"} == {"This workspace has a knowledge base of that name."}
    named = at_once(lambda i: create(i, f"Base {i}"), 20)
    assert named.count("made") == 4
    assert KnowledgeBase.objects.filter(workspace=owner.workspace).count() == 5


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_document_limit_holds_under_simultaneous_uploads(owner: Tenant, settings: Any) -> None:
    settings.KNOWLEDGE_WORKSPACE_MAX_DOCUMENTS = 6
    base = services.knowledge_base_create(workspace=owner.workspace, name="Flood")

    def upload(index: int) -> str:
        mine = KnowledgeBase.objects.select_related("workspace").get(pk=base.pk)
        content = f"Passage number {index}.".encode()
        return _attempt(
            lambda: services.document_upload(base=mine, filename=f"{index}.txt", content=content)
        )

    results = at_once(upload, 30)
    assert results.count("made") == 6
    assert Document.objects.filter(workspace=owner.workspace).count() == 6
    assert "A workspace has at most 6 documents." in results


@pytest.mark.django_db(transaction=True)
def test_a_workspaces_documents_hold_at_most_their_byte_quota(
    owner: Tenant, outsider: Tenant, settings: Any
) -> None:
    settings.KNOWLEDGE_WORKSPACE_MAX_BYTES = 1024 * 1024 // 100
    base = services.knowledge_base_create(workspace=owner.workspace, name="Big")
    page = b"Returns are accepted within thirty days. " * 150  # 6 KB
    services.document_upload(base=base, filename="one.txt", content=page)
    with pytest.raises(ValidationError, match=r"hold at most 0\.01 MB together"):
        services.document_upload(base=base, filename="two.txt", content=page)
    other = services.knowledge_base_create(workspace=outsider.workspace, name="Big")
    services.document_upload(base=other, filename="two.txt", content=page)  # its own quota


@pytest.mark.postgres  # PostgreSQL's behaviour (NUL refused, row locks across threads)
@pytest.mark.django_db(transaction=True)
def test_a_refresh_while_indexing_queues_nothing_more(owner: Tenant) -> None:
    base = services.knowledge_base_create(workspace=owner.workspace, name="Manuals")
    document = services.document_upload(base=base, filename="a.txt", content=b"Some text.")
    for status in ("pending", "indexing"):
        Document.objects.filter(pk=document.pk).update(status=status)
        with pytest.raises(ValidationError, match="being indexed now"):
            services.document_refresh(document=document)
