"""Where delivery attempts run: the one switch (``core.backends``) chooses.

- Production: a Celery task per attempt (``webhooks.deliver``, routed to the ``webhooks``
  queue that only the webhook worker consumes), delayed with ``countdown``, so retries
  survive a restart of the web processes.
- Embedded default: a thread of the platform's own process keeps a timetable and runs
  attempts on worker threads (the per-workspace cap plus two, so a workspace at its cap
  leaves room for others); an eager Celery task would run them (and wait out every
  backoff) inside the session's own shutdown. When it starts, it picks up the
  deliveries a previous run left unfinished.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import connection

from core import backends

logger = logging.getLogger(__name__)


def schedule(delivery_id: int, attempt: int, delay_s: float, *, slot: str | None = None) -> None:
    """Run attempt ``attempt`` of a delivery in ``delay_s`` seconds (in ``slot``, its
    workspace's slot taken for it already: ``in_flight``)."""
    if backends.tasks_inline():
        _embedded().schedule(delivery_id, attempt, delay_s, slot)
        return
    from webhooks_app.tasks import deliver

    deliver.apply_async((delivery_id, attempt, slot), countdown=max(0.0, delay_s))


class EmbeddedDispatcher:
    """A timetable of attempts, run by a daemon thread; attempts run on worker threads."""

    def __init__(self, workers: int) -> None:
        from django.utils import timezone

        self.started_at = timezone.now()
        self._timetable: list[tuple[float, int, int, int, str | None]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._workers = ThreadPoolExecutor(workers, thread_name_prefix="webhook-delivery")
        self._thread: threading.Thread | None = None
        self._running: set[Future[None]] = set()

    def schedule(
        self, delivery_id: int, attempt: int, delay_s: float, slot: str | None = None
    ) -> None:
        due = time.monotonic() + max(0.0, delay_s)
        with self._wake:
            entry = (due, next(self._order), delivery_id, attempt, slot)
            heapq.heappush(self._timetable, entry)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="webhook-timetable", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        self._submit(_catch_up, self)
        while True:
            with self._wake:
                while not self._timetable or self._timetable[0][0] > time.monotonic():
                    timeout = self._timetable[0][0] - time.monotonic() if self._timetable else None
                    self._wake.wait(timeout)
                _due, _order, delivery_id, attempt, slot = heapq.heappop(self._timetable)
            self._submit(self._attempt, delivery_id, attempt, slot)

    def _submit(self, *call: Any) -> None:
        job = self._workers.submit(*call)
        with self._wake:
            self._running.add(job)
        job.add_done_callback(self._done)

    def _done(self, job: Future[None]) -> None:
        with self._wake:
            self._running.discard(job)

    def wait_idle(self) -> None:
        """Tests on the embedded default: wait for the attempts (and the catch-up) running
        now; attempts due later stay on the timetable."""
        while True:
            with self._wake:
                running = list(self._running)
            if not running:
                return
            for job in running:
                job.exception()

    def _attempt(self, delivery_id: int, attempt: int, slot: str | None) -> None:
        from webhooks_app.services import delivery_attempt

        try:
            following = delivery_attempt(delivery_id=delivery_id, attempt=attempt, slot=slot)
        except Exception as exc:  # the next attempt (or a restart) picks it up again
            logger.error("webhook delivery %s failed: %s", delivery_id, type(exc).__name__)
            following = None
        finally:
            connection.close()  # attempts are rare: no idle connection left in this thread
        if following is not None:
            self.schedule(delivery_id, following.attempt, following.delay_s)


def _catch_up(dispatcher: EmbeddedDispatcher) -> None:
    """Deliveries a previous run of the platform left waiting are scheduled again. Only
    those made before this process's timetable started: a delivery of this process is on
    the timetable already, and may be in the middle of an attempt that the catch-up would
    otherwise take for an unfinished one and repeat."""
    from django.utils import timezone

    from webhooks_app.models import WebhookDelivery

    try:
        waiting = WebhookDelivery.objects.filter(
            status__in=[WebhookDelivery.Status.PENDING, WebhookDelivery.Status.RETRYING],
            created_at__lt=dispatcher.started_at,
        ).values_list("pk", "attempts", "next_attempt_at")
        for delivery_id, attempts, next_at in waiting:
            delay = (next_at - timezone.now()).total_seconds() if next_at else 0.0
            dispatcher.schedule(delivery_id, attempts + 1, delay)
    except Exception as exc:
        logger.warning("webhook catch-up failed: %s", type(exc).__name__)
    finally:
        connection.close()


_dispatcher: EmbeddedDispatcher | None = None
_dispatcher_lock = threading.Lock()


def wait_idle() -> None:
    """Tests on the embedded default: wait for the delivery attempts running now."""
    if _dispatcher is not None:
        _dispatcher.wait_idle()


def _embedded() -> EmbeddedDispatcher:
    global _dispatcher
    with _dispatcher_lock:
        if _dispatcher is None:
            _dispatcher = EmbeddedDispatcher(settings.WEBHOOK_WORKSPACE_IN_FLIGHT + 2)
        return _dispatcher
