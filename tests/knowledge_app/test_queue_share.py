"""The indexing queue is shared fairly: a workspace has at most
``KNOWLEDGE_WORKSPACE_IN_FLIGHT`` documents queued or being indexed, the rest parked, so
another workspace's document is indexed after at most that many of a busy one's, however
many it uploaded (before, the queue was first come, first served)."""

from __future__ import annotations

from typing import Any

import pytest

from knowledge_app import dispatch, services
from knowledge_app.models import Document
from tests.factories import Tenant


@pytest.mark.django_db(transaction=True)
def test_another_workspaces_document_waits_behind_one_of_a_flooding_workspace(
    owner: Tenant, outsider: Tenant, settings: Any
) -> None:
    settings.KNOWLEDGE_WORKSPACE_IN_FLIGHT = 1
    flood = services.knowledge_base_create(workspace=owner.workspace, name="Flood")
    calm = services.knowledge_base_create(workspace=outsider.workspace, name="Manuals")
    for number in range(5):
        text = f"Notes number {number}. " * 400
        services.document_upload(base=flood, filename=f"notes{number}.txt", content=text.encode())
    services.document_upload(base=calm, filename="returns.txt", content=b"Returns: 30 days.")
    dispatch.wait_idle()
    order = list(
        Document.objects.order_by("indexed_at").values_list("workspace_id", "status", "title")
    )
    assert all(status == "ready" for _, status, _ in order), order
    calm_place = [workspace for workspace, _, _ in order].index(outsider.workspace.pk)
    assert calm_place <= 1, order  # behind at most the flood's one document in flight
    assert dispatch.slots.in_flight(owner.workspace.pk) == 0
    assert dispatch.slots.parked(owner.workspace.pk) == 0
