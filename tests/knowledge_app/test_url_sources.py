"""A URL document is fetched by the indexing job, not the request: the request stores the
URL (refusing at once one the egress guard's rules refuse as written) and answers with the
document pending; the job fetches it through the guard, and a failed fetch is the
document's error. A URL may be fetched again every ``refresh_hours`` (Celery beat's
``refresh_due``); bytes that hash the same are not indexed again."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

import egress
from knowledge_app import dispatch, services
from knowledge_app.models import Chunk, Document
from knowledge_app.search import search
from tests.factories import Tenant
from tests.fakes.egress_server import EgressTestServer, respond, silent
from tests.knowledge_app import documents

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = documents.corpus("declaration.html")
HTML = [("Content-Type", "text/html")]


async def _settled(document: Document) -> Document:
    await sync_to_async(dispatch.wait_idle)()
    await sync_to_async(document.refresh_from_db)()
    return document


def _chunk_ids(document: Document) -> set[int]:
    return set(Chunk.objects.filter(document=document).values_list("pk", flat=True))


async def test_the_request_answers_pending_while_a_slow_server_is_still_silent(
    owner: Tenant, owner_api: Any, settings: Any
) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = True  # the test server is on loopback
    settings.KNOWLEDGE_FETCH_TIMEOUT_S = 2.0
    async with EgressTestServer() as server:
        server.route("/slow", silent())
        base = await sync_to_async(owner_api.post)(
            "/api/v1/knowledge-bases", {"name": "Web"}, format="json"
        )
        started = time.monotonic()
        answer = await sync_to_async(owner_api.post)(
            f"/api/v1/knowledge-bases/{base.json()['id']}/documents",
            {"url": server.url("/slow"), "refresh_hours": 6},
        )
        answered_in = time.monotonic() - started
        assert answer.status_code == 201, answer.content
        assert (answer.json()["status"], answer.json()["kind"]) == ("pending", "")
        assert answer.json()["refresh_hours"] == 6
        document = await _settled(await Document.objects.aget(uid=answer.json()["id"]))
    assert answered_in < 1.5  # the fetch's 2 s timeout ran in the job, not the request
    assert document.status == "failed" and "2 s" in document.error, document.error
    assert len(server.requests) == 1
    # The failed fetch still sets the next scheduled one.
    assert document.refresh_due_at is not None
    assert document.refresh_due_at > timezone.now() + datetime.timedelta(hours=5)


async def test_a_failed_fetch_is_the_documents_error_then_a_refresh_indexes_it(
    owner: Tenant, settings: Any
) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    async with EgressTestServer() as server:
        server.route("/page", respond(404, b"gone"))
        base = await sync_to_async(services.knowledge_base_create)(
            workspace=owner.workspace, name="Web"
        )
        document = await sync_to_async(services.document_add_url)(
            base=base, url=server.url("/page")
        )
        document = await _settled(document)
        assert (document.status, document.error) == ("failed", "The server answered HTTP 404.")
        server.route("/page", respond(200, PAGE, HTML))
        await sync_to_async(services.document_refresh)(document=document)
        document = await _settled(document)
    assert (document.status, document.kind, document.error) == ("ready", "html", "")
    assert document.fetched_at is not None and document.chunk_count > 0


def test_a_name_that_resolves_to_a_private_address_fails_in_the_job(
    owner: Tenant, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = False

    async def scripted(host: str, port: int) -> list[str]:
        return ["192.168.1.20"]

    monkeypatch.setattr(egress.guard, "lookup", scripted)
    base = services.knowledge_base_create(workspace=owner.workspace, name="Web")
    document = services.document_add_url(base=base, url="http://printer.internal.example/doc")
    dispatch.wait_idle()
    document.refresh_from_db()
    assert document.status == "failed"
    assert "is not a public address the platform can reach" in document.error
    assert "192.168" not in document.error and not Chunk.objects.exists()


async def test_a_scheduled_refresh_reindexes_only_changed_bytes(
    owner: Tenant, settings: Any
) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    async with EgressTestServer() as server:
        server.route("/page", respond(200, PAGE, HTML))
        base = await sync_to_async(services.knowledge_base_create)(
            workspace=owner.workspace, name="Web"
        )
        document = await sync_to_async(services.document_add_url)(
            base=base, url=server.url("/page"), refresh_hours=1
        )
        document = await _settled(document)
        assert document.status == "ready"
        indexed_at, chunks = document.indexed_at, await sync_to_async(_chunk_ids)(document)
        # Not due yet: nothing queued.
        assert await sync_to_async(services.refresh_due)() == 0
        later = timezone.now() + datetime.timedelta(hours=1, minutes=1)
        assert await sync_to_async(services.refresh_due)(now=later) == 1
        document = await _settled(document)
        # Fetched again, the same bytes: the same passages, not indexed again.
        assert len(server.requests) == 2 and document.status == "ready"
        assert document.indexed_at == indexed_at
        assert await sync_to_async(_chunk_ids)(document) == chunks
        assert document.refresh_due_at > later - datetime.timedelta(minutes=2)
        server.route("/page", respond(200, b"<p>Replaced text about liberty bells.</p>", HTML))
        later = document.refresh_due_at + datetime.timedelta(minutes=1)
        assert await sync_to_async(services.refresh_due)(now=later) == 1
        document = await _settled(document)
        found = await sync_to_async(search)(
            workspace_id=owner.workspace.pk, knowledge_base_ids=[base.pk], query="liberty bells"
        )
    assert len(server.requests) == 3 and document.indexed_at > indexed_at
    assert not chunks & await sync_to_async(_chunk_ids)(document)
    assert "liberty bells" in found[0].text


def test_a_refresh_is_refused_while_indexing_and_the_schedule_skips_it(
    owner: Tenant,
) -> None:
    base = services.knowledge_base_create(workspace=owner.workspace, name="Web")
    document = Document.objects.create(
        workspace=owner.workspace, knowledge_base=base, url="https://example.com/a",
        content=b"", title="a", status="indexing", refresh_hours=1,
        refresh_due_at=timezone.now() - datetime.timedelta(hours=1),
    )  # fmt: skip
    with pytest.raises(services.ValidationError, match="being indexed"):
        services.document_refresh(document=document)
    assert services.refresh_due() == 0
    document.refresh_from_db()
    assert document.status == "indexing"


def test_one_workspace_with_many_due_urls_does_not_crowd_out_another(
    owner: Tenant, outsider: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued: list[int] = []
    monkeypatch.setattr(dispatch, "schedule", lambda *args: queued.append(args[0]))
    monkeypatch.setattr(services, "REFRESH_PER_WORKSPACE", 3)
    long_ago = timezone.now() - datetime.timedelta(days=1)
    for tenant, count, due in ((owner, 10, long_ago), (outsider, 2, timezone.now())):
        base = services.knowledge_base_create(workspace=tenant.workspace, name="Web")
        Document.objects.bulk_create(
            Document(
                workspace=tenant.workspace,
                knowledge_base=base,
                url=f"https://e.com/{n}",
                content=b"",
                title=str(n),
                status="ready",
                refresh_hours=1,
                refresh_due_at=due,
            )
            for n in range(count)
        )
    assert services.refresh_due() == 5  # 3 of the owner's (the oldest), both of theirs
    by_workspace = Document.objects.filter(pk__in=queued).values_list("workspace_id", flat=True)
    assert sorted(by_workspace) == sorted([owner.workspace.pk] * 3 + [outsider.workspace.pk] * 2)
    assert services.refresh_due() == 3  # the next run: the owner's next three


@pytest.mark.parametrize(
    ("refresh_hours", "refused"),
    [(0, False), (1, False), (720, False), (721, True)],
)
def test_refresh_hours_limits(
    owner: Tenant, settings: Any, monkeypatch: pytest.MonkeyPatch, refresh_hours: int, refused: bool
) -> None:
    monkeypatch.setattr(dispatch, "schedule", lambda *args: None)  # no fetch: limits only
    base = services.knowledge_base_create(workspace=owner.workspace, name="Web")
    add = lambda: services.document_add_url(  # noqa: E731
        base=base, url="https://example.com/a", refresh_hours=refresh_hours
    )
    if refused:
        with pytest.raises(services.ValidationError, match="every 1 to 720 hours"):
            add()
    else:
        assert add().refresh_hours == refresh_hours
    settings.KNOWLEDGE_REFRESH_MIN_HOURS = 4
    with pytest.raises(services.ValidationError, match="every 4 to 720 hours"):
        services.document_add_url(base=base, url="https://example.com/b", refresh_hours=2)


def test_the_api_refuses_a_schedule_on_an_upload(owner_api: Any) -> None:
    base = owner_api.post("/api/v1/knowledge-bases", {"name": "B"}, format="json").json()
    from django.core.files.uploadedfile import SimpleUploadedFile

    answer = owner_api.post(
        f"/api/v1/knowledge-bases/{base['id']}/documents",
        {"file": SimpleUploadedFile("a.txt", b"Some text."), "refresh_hours": 2},
    )
    assert answer.status_code == 400 and "refresh_hours" in answer.json()["error"]["fields"]


def test_beat_runs_the_sweep_on_the_knowledge_queue(settings: Any) -> None:
    """(A worker running the task: test_celery_indexing.)"""
    entry = {e["task"]: e for e in settings.CELERY_BEAT_SCHEDULE.values()}
    assert entry[dispatch.REFRESH_TASK]["schedule"] <= 600
    assert settings.CELERY_TASK_ROUTES[dispatch.REFRESH_TASK] == {"queue": "knowledge"}


def test_the_api_changes_a_urls_schedule_and_refuses_one_for_an_upload(
    owner: Tenant, owner_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    monkeypatch.setattr(dispatch, "schedule", lambda *args: None)  # no fetch: the schedule only
    base = owner_api.post("/api/v1/knowledge-bases", {"name": "B"}, format="json").json()
    documents_at = f"/api/v1/knowledge-bases/{base['id']}/documents"
    url_document = owner_api.post(documents_at, {"url": "https://example.com/faq"}).json()
    upload = owner_api.post(documents_at, {"file": SimpleUploadedFile("a.txt", b"Text.")}).json()
    changed = owner_api.patch(
        f"{documents_at}/{url_document['id']}", {"refresh_hours": 24}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["refresh_hours"] == 24
    assert changed.json()["refresh_due_at"] is not None
    off = owner_api.patch(
        f"{documents_at}/{url_document['id']}", {"refresh_hours": 0}, format="json"
    )
    assert (off.json()["refresh_hours"], off.json()["refresh_due_at"]) == (0, None)
    refused = owner_api.patch(f"{documents_at}/{upload['id']}", {"refresh_hours": 2}, format="json")
    assert refused.status_code == 400 and "refresh_hours" in refused.json()["error"]["fields"]
