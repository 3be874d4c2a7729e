"""A knowledge base embedded by the workspace's own OpenAI-compatible ``/embeddings``
connection instead of the offline model: passages indexed and a question retrieved through
it (batched, the key sent as a Bearer token to that host only), a change of model
re-indexing the base, a provider that misbehaves failing one document with a sentence, a
private address refused, and another workspace's connection out of reach."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError

from knowledge_app import dispatch, embedders, search, services
from knowledge_app.models import Document, KnowledgeBase
from secrets_app.models import AuditEvent, ProviderCredential
from sessions_app import services as agent_services
from sessions_app.models import ToolCallRecord
from tests.engine.providers.llm.openai import fake_server as fake_openai
from tests.factories import Tenant
from tests.fakes.egress_server import EgressTestServer, redirect
from tests.fakes.openai_embeddings import FakeEmbeddingsServer
from tests.knowledge_app.test_knowledge_turns import _turn

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "sk-embed-test-4f1c9a7e2b"
DIMENSIONS = 48
TOPICS = [
    "Refunds are paid to the card within fourteen days of the return",
    "Shipping takes three working days inside the country",
    "The warranty covers defects for two years after purchase",
    "Gift cards never expire and can be used online",
    "Our stores open at nine in the morning on weekdays",
    "Exchanges need the original receipt and the packaging",
]
FILLER = " ".join(["the store keeps careful records for every customer it serves"] * 9)
POLICY = "\n\n".join(f"{topic}. {FILLER}. That is all." for topic in TOPICS).encode()
# The fake model hears "zorblax" as "refunds": no full-text index and no other model does.
SYNONYMS = {"zorblax": "refunds"}


@pytest.fixture
async def provider(settings: Any) -> AsyncIterator[FakeEmbeddingsServer]:
    settings.DEV_ALLOW_PRIVATE_EGRESS = True  # the fake is on loopback
    settings.KNOWLEDGE_EMBEDDING_BATCH = 4
    settings.KNOWLEDGE_EMBEDDING_TIMEOUT_S = 2.0
    settings.KNOWLEDGE_EMBEDDING_QUESTION_TIMEOUT_S = 1.0
    async with FakeEmbeddingsServer(dimensions=DIMENSIONS, synonyms=SYNONYMS) as server:
        yield server


def _connection(tenant: Tenant, url: str, name: str = "fake-small") -> ProviderCredential:
    return services.embedding_connection_set(
        workspace=tenant.workspace, name=name, base_url=url, model="fake-embed-1", api_key=KEY
    )


def _base_with(tenant: Tenant, connection: str | None, name: str = "Policies") -> KnowledgeBase:
    base = services.knowledge_base_create(workspace=tenant.workspace, name=name)
    return services.knowledge_base_set_embedding(base=base, connection_name=connection)


def _upload(base: KnowledgeBase, content: bytes = POLICY, name: str = "policy.txt") -> Document:
    document = services.document_upload(base=base, filename=name, content=content)
    dispatch.wait_idle()
    document.refresh_from_db()
    return document


async def test_passages_and_questions_are_embedded_by_the_connection_in_batches(
    owner: Tenant, provider: FakeEmbeddingsServer
) -> None:
    await sync_to_async(_connection)(owner, provider.base_url)
    base = await sync_to_async(_base_with)(owner, "fake-small")
    document = await sync_to_async(_upload)(base)

    assert (document.status, document.error) == ("ready", "")
    assert document.embedded_with == embedders.space_of(
        await ProviderCredential.objects.aget(name="fake-small")
    )
    assert document.embedding_dimensions == DIMENSIONS
    assert [len(r.json["input"]) for r in provider.requests] == [4, 2]  # 6 passages, 4 a batch
    assert all(r.path == "/v1/embeddings" for r in provider.requests)
    assert {r.json["model"] for r in provider.requests} == {"fake-embed-1"}
    assert {r.headers["authorization"] for r in provider.requests} == {f"Bearer {KEY}"}

    found = await sync_to_async(search.search_noted)(
        workspace_id=owner.workspace.pk, knowledge_base_ids=[base.pk], query="zorblax?", k=3
    )
    assert found.note == ""
    assert "Refunds are paid" in found.passages[0].text
    assert provider.requests[-1].json["input"] == ["zorblax?"]  # the question, by the provider


async def test_choosing_another_model_reindexes_the_base_off_the_request(
    owner: Tenant, provider: FakeEmbeddingsServer, owner_api: Any
) -> None:
    base = await sync_to_async(_base_with)(owner, None)
    before = await sync_to_async(_upload)(base)
    assert (before.embedded_with, before.embedding_dimensions) == (embedders.OFFLINE_SPACE, 384)
    await sync_to_async(_connection)(owner, provider.base_url)

    answer = await sync_to_async(owner_api.put)(
        f"/api/v1/knowledge-bases/{base.uid}/embedding", {"connection": "fake-small"},
        format="json",
    )  # fmt: skip
    assert answer.status_code == 200, answer.content
    assert answer.json()["embedding"]["connection"] == "fake-small"
    assert answer.json()["embedding"]["reindexing"] is True  # the answer came before the job
    await sync_to_async(dispatch.wait_idle)()

    after = await Document.objects.aget(pk=before.pk)
    assert (after.status, after.embedding_dimensions) == ("ready", DIMENSIONS)
    assert after.embedded_with != embedders.OFFLINE_SPACE
    assert sorted(provider.inputs()) == sorted(  # the stored passages, not parsed again
        [c async for c in after.chunks.values_list("text", flat=True)]
    )
    shown = await sync_to_async(owner_api.get)(f"/api/v1/knowledge-bases/{base.uid}")
    assert shown.json()["embedding"] == {
        "connection": "fake-small", "model": "fake-embed-1 (connection fake-small)",
        "documents": 1, "embedded": 1, "reindexing": False,
    }  # fmt: skip
    event = await AuditEvent.objects.filter(action="knowledge_base.embedding_changed").alatest("pk")
    assert event.details["documents_queued"] == 1


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ({"data": []}, "answered 0 vectors for 6 texts"),
        ({"object": "list"}, "not an embeddings list"),
        ({"data": [{"index": i, "embedding": [1.0] * (3 + i)} for i in range(6)]}, "one length"),
        ({"data": [{"index": 0, "embedding": [1.0, "x"]}] * 6}, "not a number"),
        ({"data": [{"index": 0, "embedding": [1.0]}] * 6}, "not one per text"),
        ({"data": [{"index": i, "embedding": [0.0, 0.0]} for i in range(6)]}, "zeros"),
        ({"data": [{"index": i, "embedding": [1.0] * 5000} for i in range(6)]}, "5000 numbers"),
    ],
)
async def test_a_wrong_answer_fails_the_document_with_a_sentence(
    owner: Tenant, provider: FakeEmbeddingsServer, settings: Any, answer: Any, error: str
) -> None:
    settings.KNOWLEDGE_EMBEDDING_BATCH = 8  # one request for the six passages
    await sync_to_async(_connection)(owner, provider.base_url)
    base = await sync_to_async(_base_with)(owner, "fake-small")
    provider.script(fake_openai.JsonBody(answer))
    failed = await sync_to_async(_upload)(base)
    assert failed.status == "failed" and error in failed.error, failed.error
    assert failed.chunk_count == 0
    # The provider's next answer is a good one: the next document is indexed.
    assert (await sync_to_async(_upload)(base, name="again.txt")).status == "ready"


@pytest.mark.parametrize(
    ("step", "error"),
    [
        (fake_openai.PlainBody(b"[" + b"0.5," * 400_000 + b"0]", 200, "application/json"),
         "larger than"),
        (fake_openai.Delay(5), "took longer than 2 s"),
        (fake_openai.Cut(), "The embedding provider failed"),
        (fake_openai.HttpError(503, "The engine is currently overloaded"),
         "HTTP 503: The engine is currently overloaded"),
    ],
)  # fmt: skip
async def test_a_huge_silent_or_broken_provider_fails_one_document(
    owner: Tenant, provider: FakeEmbeddingsServer, settings: Any, step: Any, error: str
) -> None:
    settings.KNOWLEDGE_EMBEDDING_MAX_DIMENSIONS = 64  # answers past ~76 KB are cut off
    await sync_to_async(_connection)(owner, provider.base_url)
    base = await sync_to_async(_base_with)(owner, "fake-small")
    provider.script(step)
    failed = await sync_to_async(_upload)(base)
    assert failed.status == "failed" and error in failed.error, failed.error


async def test_the_key_goes_to_the_connections_host_only_and_never_into_an_error(
    owner: Tenant, provider: FakeEmbeddingsServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    provider.script(
        fake_openai.HttpError(401, f"Incorrect API key provided: {KEY}. Or {KEY[:6]}****{KEY[-4:]}")
    )
    await sync_to_async(_connection)(owner, provider.base_url)
    base = await sync_to_async(_base_with)(owner, "fake-small")
    failed = await sync_to_async(_upload)(base)
    assert failed.status == "failed" and "HTTP 401: Incorrect API key provided: [key]" in (
        failed.error
    )
    # A connection that redirects elsewhere: the request goes on, the key does not.
    async with EgressTestServer() as redirecting:
        redirecting.route("/v1/embeddings", redirect(provider.base_url + "/embeddings", 307))
        await sync_to_async(_connection)(owner, redirecting.url("/v1"), name="moved")
        moved = await sync_to_async(_base_with)(owner, "moved", name="Moved")
        document = await sync_to_async(_upload)(moved)
    assert document.status == "ready"
    assert redirecting.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert "authorization" not in provider.requests[-1].headers  # the other port's request
    saved = await ProviderCredential.objects.aget(name="moved")
    texts = [failed.error, caplog.text, str(saved.ciphertext)]
    texts += [str(e.details) async for e in AuditEvent.objects.all()]
    assert not any(KEY in text or KEY[-10:] in text for text in texts)


async def test_a_private_address_is_refused_without_the_development_override(
    owner: Tenant, provider: FakeEmbeddingsServer, settings: Any
) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = False
    with pytest.raises(ValidationError, match="refused"):
        await sync_to_async(_connection)(owner, provider.base_url)
    # Saved while the override was on, dialled after it was turned off: refused in the job.
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    await sync_to_async(_connection)(owner, provider.base_url)
    base = await sync_to_async(_base_with)(owner, "fake-small")
    settings.DEV_ALLOW_PRIVATE_EGRESS = False
    failed = await sync_to_async(_upload)(base)
    assert failed.status == "failed" and "Only public addresses" in failed.error, failed.error
    assert provider.requests == []


async def test_a_provider_down_during_a_search_falls_back_to_full_text(
    owner: Tenant, provider: FakeEmbeddingsServer
) -> None:
    await sync_to_async(_connection)(owner, provider.base_url)
    base = await sync_to_async(_base_with)(owner, "fake-small")
    await sync_to_async(_upload)(base)
    provider.script(fake_openai.HttpError(503, "overloaded"))
    found = await sync_to_async(search.search_noted)(
        workspace_id=owner.workspace.pk, knowledge_base_ids=[base.pk],
        query="how long is the warranty", k=3,
    )  # fmt: skip
    assert "The warranty covers" in found.passages[0].text
    assert found.note.startswith("Searched by full text alone: ") and "HTTP 503" in found.note


def test_another_workspaces_connection_cannot_be_chosen_seen_or_deleted(
    owner: Tenant, outsider: Tenant, owner_api: Any, settings: Any
) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    _connection(outsider, "http://127.0.0.1:9/v1", name="theirs")
    base = _base_with(owner, None)
    chosen = owner_api.put(
        f"/api/v1/knowledge-bases/{base.uid}/embedding", {"connection": "theirs"}, format="json"
    )
    assert chosen.status_code == 400 and "no embedding connection" in str(chosen.json())
    assert owner_api.get("/api/v1/knowledge-embedding-connections").json() == []
    assert owner_api.get("/api/v1/knowledge-embedding-connections/theirs").status_code == 404
    assert owner_api.delete("/api/v1/knowledge-embedding-connections/theirs").status_code == 404
    assert ProviderCredential.objects.filter(name="theirs").exists()
    base.refresh_from_db()
    assert base.embedding_connection is None


def test_the_api_saves_a_connection_never_shows_its_key_and_keeps_one_in_use(
    owner: Tenant, owner_api: Any, settings: Any
) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    body = {"name": "small", "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": KEY}
    saved = owner_api.post("/api/v1/knowledge-embedding-connections", body, format="json")
    assert saved.status_code == 201, saved.content
    assert saved.json()["has_key"] is True and KEY not in saved.content.decode()
    changed = owner_api.post(
        "/api/v1/knowledge-embedding-connections", {**body, "model": "m2", "api_key": ""},
        format="json",
    )  # fmt: skip
    assert changed.status_code == 200 and changed.json()["has_key"] is True  # the key was kept
    _base_with(owner, "small")
    kept = owner_api.delete("/api/v1/knowledge-embedding-connections/small")
    assert kept.status_code == 400 and "Policies" in str(kept.json())
    events = AuditEvent.objects.filter(action__startswith="provider.").order_by("pk")
    assert [(e.action, e.target) for e in events] == [
        ("provider.created", "Embedding connection small"),
        ("provider.updated", "Embedding connection small"),
    ]
    assert events[1].details["model"] == "m2" and events[1].details["key_saved"] is False


@pytest.mark.usefixtures("no_leases")
async def test_a_turn_whose_provider_is_down_answers_from_full_text_and_the_record_says_so(
    owner: Tenant, provider: FakeEmbeddingsServer, llm: fake_openai.FakeOpenAIServer
) -> None:
    await sync_to_async(_connection)(owner, provider.base_url)
    base = await sync_to_async(_base_with)(owner, "fake-small")
    await sync_to_async(_upload)(base)
    agent = await sync_to_async(agent_services.agent_create)(
        workspace=owner.workspace, name="Shop", slug="civics", instructions="Be brief."
    )
    await sync_to_async(services.agent_knowledge_set)(
        agent=agent, knowledge_base_uids=[str(base.uid)], mode="prefetch"
    )
    provider.script(fake_openai.Delay(5))  # the question's request: slower than its 1 s
    llm.script(fake_openai.text_reply("Two years."))
    chat, session = await _turn(owner, "How long is the warranty?")

    assert chat["text"] == "Two years."
    assert chat["steps"][1].startswith("Source ") and "policy.txt" in chat["steps"][1]
    assert chat["steps"][-1].startswith("Searched by full text alone: ")
    record = await ToolCallRecord.objects.aget(session=session)
    result = json.loads(record.result)
    assert "The warranty covers" in result["passages"][0]["text"]
    assert "took longer than 1 s" in result["retrieval"]


def test_a_workspace_goes_with_its_bases_and_the_connection_they_embed_with(
    owner: Tenant, settings: Any
) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    _connection(owner, "http://127.0.0.1:9/v1")
    _base_with(owner, "fake-small")
    owner.workspace.delete()
    assert not ProviderCredential.objects.filter(name="fake-small").exists()
    assert not KnowledgeBase.objects.exists()
