"""Work that runs off the request or the session, by the one switch (``core.backends``): a
Celery task sent by name in production, or a thread of the platform's own process on the
embedded default (an eager task would run inside the request or the session's record
writer). A queue is sent tasks by name, so the module that schedules imports neither its
service nor its task (the task calls the service, which schedules here)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from celery import current_app
from django.db import connection

from core import backends

logger = logging.getLogger(__name__)


class BackgroundQueue:
    """One kind of background work: on the embedded default, one job at a time on a thread
    named ``name`` (made at first use)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._pending: set[Future[None]] = set()

    def schedule(
        self,
        task: str,
        object_id: int,
        run: Callable[[int], object],
        *,
        task_args: tuple[str | int, ...] = (),
    ) -> None:
        """A Celery worker runs ``task`` with ``object_id`` (and ``task_args``; it calls the
        same service as ``run``), or, on the embedded default, ``run(object_id)`` runs on
        this queue's thread."""
        if not backends.tasks_inline():
            current_app.send_task(task, args=(object_id, *task_args))
            return
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix=self._name)
            job = self._pool.submit(_run, self._name, run, object_id)
            self._pending.add(job)
        job.add_done_callback(self._pending.discard)

    def wait_idle(self) -> None:
        """Tests on the embedded default: wait for queued jobs to finish, and for the jobs
        they queued in turn."""
        while self._pending:
            with self._lock:
                waiting = list(self._pending)
            for job in waiting:
                job.result()


def _run(name: str, run: Callable[[int], object], object_id: int) -> None:
    try:
        run(object_id)
    except Exception as exc:
        # As a Celery worker would: the job's failure is told even if nobody waits for it.
        # The type only: a database error can quote the row.
        logger.error("%s job for %s failed: %s", name, object_id, type(exc).__name__)
        raise
    finally:
        connection.close()  # a pool thread's connection would outlive its use
