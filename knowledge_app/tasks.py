"""The indexing task (queue ``knowledge``): loads the document by id, calls the service, in
the slot of its workspace's taken when it was queued (``dispatch``). Each knowledge
worker sweeps now and then for documents parked behind slots a dead worker held. Beat's
``refresh_due`` queues the URL documents due to be fetched again."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import close_old_connections

from core import in_flight
from knowledge_app import dispatch, services

QUEUE = "knowledge"


@shared_task(name=dispatch.INDEX_TASK, ignore_result=True, acks_late=False)
def index_document(document_id: int, slot: str | None = None) -> None:
    close_old_connections()
    dispatch.run_in_slot(document_id, slot, services.index_by_id)


@worker_ready.connect
def _start_sweeper(sender: Any = None, **_: Any) -> None:
    in_flight.start_sweeper(
        sender, queue=QUEUE, every_s=lambda: float(settings.KNOWLEDGE_PARKED_SWEEP_S),
        sweep=lambda: dispatch.sweep(services.index_by_id),
    )  # fmt: skip


@shared_task(name=dispatch.REFRESH_TASK, ignore_result=True)
def refresh_due() -> None:
    close_old_connections()
    services.refresh_due()
