"""One workspace's searches cannot slow another's: REST searches are counted per
workspace whichever of its keys asks, and a workspace has at most its share of questions
waiting for the process's one embedding thread (past it, its searches rank by full text
alone), so another workspace's question, a live session's among them, waits behind a
bounded number of the flood's."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest
from django.db import connection

from knowledge_app import embeddings, search, services
from secrets_app import services as key_services
from secrets_app.models import ApiKey
from tests.conftest import api_client
from tests.factories import Tenant

EMBED_S = 0.5  # one question's embedding on a busy web process


def _key(tenant: Tenant) -> str:
    _, plaintext = key_services.api_key_create(
        workspace=tenant.workspace, kind=ApiKey.Kind.SECRET, label="k", scopes=["knowledge"]
    )
    return plaintext


@pytest.mark.django_db
def test_rest_searches_are_limited_per_workspace_whichever_key_asks(
    owner: Tenant, outsider: Tenant, settings: Any
) -> None:
    settings.KNOWLEDGE_SEARCHES_PER_MINUTE = 3
    base = services.knowledge_base_create(workspace=owner.workspace, name="Manuals")
    other = services.knowledge_base_create(workspace=outsider.workspace, name="Manuals")
    url = f"/api/v1/knowledge-bases/{base.uid}/search"
    codes = [
        api_client(_key(owner)).post(url, {"query": "returns"}, format="json").status_code
        for _ in range(5)
    ]
    assert codes == [200, 200, 200, 429, 429]
    answer = api_client(_key(outsider)).post(
        f"/api/v1/knowledge-bases/{other.uid}/search", {"query": "returns"}, format="json"
    )
    assert answer.status_code == 200  # its own count


@pytest.fixture
def slow_embedding(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    embedded: list[str] = []
    model = embeddings.embed

    def slow(texts: list[str]) -> np.ndarray:
        time.sleep(EMBED_S)
        embedded.extend(texts)
        return model(texts)

    monkeypatch.setattr(embeddings, "embed", slow)
    return embedded


@pytest.mark.django_db(transaction=True)
def test_a_flood_of_one_workspaces_searches_holds_anothers_by_a_bounded_wait(
    owner: Tenant, outsider: Tenant, settings: Any, slow_embedding: list[str]
) -> None:
    settings.KNOWLEDGE_WORKSPACE_SEARCH_CONCURRENCY = 2
    flooded = services.knowledge_base_create(workspace=owner.workspace, name="Flood")
    calm = services.knowledge_base_create(workspace=outsider.workspace, name="Manuals")
    results: list[int] = []

    def flood(index: int) -> None:
        try:
            found = search.search(
                workspace_id=owner.workspace.pk, knowledge_base_ids=[flooded.pk],
                query=f"question {index} " + "lorem ipsum " * 200,
            )  # fmt: skip
            results.append(len(found))
        finally:
            connection.close()

    threads = [threading.Thread(target=flood, args=(i,)) for i in range(10)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    started = time.monotonic()
    search.search(workspace_id=outsider.workspace.pk, knowledge_base_ids=[calm.pk],
                  query="vault combination")  # fmt: skip
    waited = time.monotonic() - started
    for thread in threads:
        thread.join(60)
    # Behind at most the flood's two questions and its own (ten: five seconds and more).
    assert waited < 4 * EMBED_S + 1.0, f"{waited:.1f} s"
    assert len(results) == 10  # the flood's other searches were answered (full text)
    flood_embedded = [text for text in slow_embedding if text.startswith("question")]
    assert len(flood_embedded) <= 3
    assert all(len(text) <= search.EMBED_QUERY_MAX_CHARS for text in flood_embedded)


@pytest.mark.django_db(transaction=True)
def test_a_repeated_question_is_embedded_once(owner: Tenant, slow_embedding: list[str]) -> None:
    base = services.knowledge_base_create(workspace=owner.workspace, name="Manuals")
    for _ in range(3):
        search.search(
            workspace_id=owner.workspace.pk, knowledge_base_ids=[base.pk], query="opening hours"
        )
    assert slow_embedding == ["opening hours"]


def test_a_passages_source_label_does_not_count_the_platforms_passages() -> None:
    labels = [search.source_label(chunk_id) for chunk_id in (1, 2, 1042)]
    assert labels[2] == search.source_label(1042)  # the same passage, the same name
    assert len(set(labels)) == 3
    assert all(label.startswith("K") and "1042" not in label for label in labels)
