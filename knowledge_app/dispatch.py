"""Where indexing runs: a Celery task on the ``knowledge`` queue in production, a thread
of the platform's own process on the embedded default (an eager task would parse and
embed inside the upload's request), one document at a time: embedding is CPU work beside
live sessions (``core.background``).

The queue is shared by every workspace and served in order, so a workspace has at most
``KNOWLEDGE_WORKSPACE_IN_FLIGHT`` documents queued or being indexed (``core.in_flight``,
as webhook deliveries): its other documents are parked, not queued, and the next one is
queued when one of its own is done. Another workspace's document thus waits behind at
most that many of each busy workspace's, however many a tenant uploads."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings

from core.background import BackgroundQueue
from core.in_flight import WorkspaceSlots

INDEX_TASK = "knowledge.index_document"  # knowledge_app.tasks; routed to the knowledge queue
REFRESH_TASK = "knowledge.refresh_due"  # Celery beat, every 5 minutes

Index = Callable[[int], None]

slots = WorkspaceSlots(
    "knowledge",
    cap=lambda: int(settings.KNOWLEDGE_WORKSPACE_IN_FLIGHT),
    ttl_s=lambda: float(settings.KNOWLEDGE_INDEX_SLOT_TTL_S),
)
_queue = BackgroundQueue("knowledge-index")


def schedule(document_id: int, workspace_id: int, index: Index) -> None:
    """Queue the document's indexing in a slot of its workspace's, or park it until one
    is free. A Celery worker runs ``INDEX_TASK`` (which calls the same service as
    ``index``), or, on the embedded default, ``index`` runs on this process's thread."""
    slot = slots.take_or_park(workspace_id, str(document_id))
    if slot is not None:
        _start(document_id, slot, index)


def run_in_slot(document_id: int, slot: str | None, index: Index) -> None:
    """Index the document, then give its slot back: the workspace's next parked document
    is queued. (A slot that lapsed while the task waited is given back all the same.)"""
    slots.run(slot, lambda: index(document_id), lambda job, handed: _start(int(job), handed, index))


def sweep(index: Index) -> int:
    """Queue the parked documents of workspaces whose slots lapsed (a worker died)."""
    return slots.sweep_and_start(lambda job, handed: _start(int(job), handed, index))


def _start(document_id: int, slot: str, index: Index) -> None:
    _queue.schedule(
        INDEX_TASK, document_id, lambda doc: run_in_slot(doc, slot, index), task_args=(slot,)
    )


def wait_idle() -> None:
    """Tests on the embedded default: wait for queued indexing to finish (and for what it
    queued when it gave its slot back)."""
    _queue.wait_idle()
