"""Indexing as production runs it: the upload's request queues a task on the ``knowledge``
queue, a real Celery worker (started here, listening on that queue only) parses and embeds
the document, and its passages are searchable; a URL is fetched by that worker, and
beat's sweep (sent as beat sends it) fetches it again when due."""

from __future__ import annotations

import asyncio
import datetime
import os

import pytest
from asgiref.sync import sync_to_async
from celery import current_app
from django.conf import settings as django_settings
from django.utils import timezone

from knowledge_app import dispatch, services
from knowledge_app.models import Document
from knowledge_app.search import search
from tests.conftest import worker_database_url
from tests.factories import Tenant
from tests.fakes.egress_server import EgressTestServer, respond
from tests.faults.processes import Process, celery_worker
from tests.knowledge_app import documents
from tests.sessions_app.recording import eventually

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]


def _worker(tmp_path, **extra: str) -> Process:
    env = {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "REDIS_URL": django_settings.REDIS_URL,
        **extra,
    }
    return celery_worker("knowledge", env=env, log=tmp_path / "worker.log")


async def test_a_celery_worker_on_the_knowledge_queue_indexes_an_upload(
    owner: Tenant, tmp_path, settings
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False  # REDIS_URL is set: the task goes to Redis
    base = await sync_to_async(services.knowledge_base_create)(
        workspace=owner.workspace, name="Civics"
    )
    worker = await asyncio.to_thread(_worker, tmp_path)
    try:
        await sync_to_async(services.document_upload)(
            base=base, filename="bill.md", content=documents.corpus("bill_of_rights.md")
        )
        document = await eventually(
            lambda: Document.objects.filter(status__in=["ready", "failed"]).first(), within=120
        )
    finally:
        await asyncio.to_thread(worker.stop)
    assert (document.status, document.error) == ("ready", "")
    assert "knowledge.index_document" in worker.log_text()
    found = await sync_to_async(search)(
        workspace_id=owner.workspace.pk, knowledge_base_ids=[base.pk], query="quartered soldiers"
    )
    assert "No Soldier shall" in found[0].text


async def test_the_worker_fetches_a_url_and_beats_sweep_fetches_it_again(
    owner: Tenant, tmp_path, settings
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.DEV_ALLOW_PRIVATE_EGRESS = True  # the page is on loopback (this test only)
    base = await sync_to_async(services.knowledge_base_create)(
        workspace=owner.workspace, name="Web"
    )
    page = documents.corpus("declaration.html")
    async with EgressTestServer() as server:
        server.route("/page", respond(200, page, [("Content-Type", "text/html")]))
        worker = await asyncio.to_thread(_worker, tmp_path, DEV_ALLOW_PRIVATE_EGRESS="true")
        try:
            added = await sync_to_async(services.document_add_url)(
                base=base, url=server.url("/page"), refresh_hours=1
            )
            ready = await eventually(
                lambda: Document.objects.filter(
                    pk=added.pk, status__in=["ready", "failed"]
                ).first(),
                within=120,
            )
            assert (ready.status, ready.error, len(server.requests)) == ("ready", "", 1)
            past = timezone.now() - datetime.timedelta(minutes=1)
            await Document.objects.filter(pk=added.pk).aupdate(refresh_due_at=past)
            await asyncio.to_thread(current_app.send_task, dispatch.REFRESH_TASK)
            again = await eventually(
                lambda: Document.objects.filter(
                    pk=added.pk, status="ready", refresh_due_at__gt=timezone.now()
                ).first(),
                within=120,
            )
        finally:
            await asyncio.to_thread(worker.stop)
    assert len(server.requests) == 2 and again.indexed_at == ready.indexed_at  # unchanged bytes
    assert dispatch.REFRESH_TASK in worker.log_text()
