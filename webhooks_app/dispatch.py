"""Where delivery attempts run: the one switch (``platform_site.backends``) chooses.

- Production: a Celery task per attempt (``webhooks.deliver``), delayed with
  ``countdown``, so retries survive a restart of the web processes.
- Embedded default: a thread of the platform's own process keeps a timetable and runs
  attempts on two worker threads; an eager Celery task would run them (and wait out
  every backoff) inside the session's own shutdown. When it starts, it picks up the
  deliveries a previous run left unfinished.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.db import connection

from platform_site import backends

logger = logging.getLogger(__name__)


def schedule(delivery_id: int, attempt: int, delay_s: float) -> None:
    """Run attempt ``attempt`` of a delivery in ``delay_s`` seconds."""
    if backends.tasks_inline():
        _embedded().schedule(delivery_id, attempt, delay_s)
        return
    from webhooks_app.tasks import deliver

    deliver.apply_async((delivery_id, attempt), countdown=max(0.0, delay_s))


class EmbeddedDispatcher:
    """A timetable of attempts, run by a daemon thread; attempts run on worker threads."""

    def __init__(self, workers: int = 2) -> None:
        from django.utils import timezone

        self.started_at = timezone.now()
        self._timetable: list[tuple[float, int, int, int]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._workers = ThreadPoolExecutor(workers, thread_name_prefix="webhook-delivery")
        self._thread: threading.Thread | None = None

    def schedule(self, delivery_id: int, attempt: int, delay_s: float) -> None:
        due = time.monotonic() + max(0.0, delay_s)
        with self._wake:
            heapq.heappush(self._timetable, (due, next(self._order), delivery_id, attempt))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="webhook-timetable", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        self._workers.submit(_catch_up, self)
        while True:
            with self._wake:
                while not self._timetable or self._timetable[0][0] > time.monotonic():
                    timeout = self._timetable[0][0] - time.monotonic() if self._timetable else None
                    self._wake.wait(timeout)
                _due, _order, delivery_id, attempt = heapq.heappop(self._timetable)
            self._workers.submit(self._attempt, delivery_id, attempt)

    def _attempt(self, delivery_id: int, attempt: int) -> None:
        from webhooks_app.services import delivery_attempt

        try:
            delay = delivery_attempt(delivery_id=delivery_id, attempt=attempt)
        except Exception as exc:  # the next attempt (or a restart) picks it up again
            logger.error("webhook delivery %s failed: %s", delivery_id, type(exc).__name__)
            delay = None
        finally:
            connection.close()  # attempts are rare: no idle connection left in this thread
        if delay is not None:
            self.schedule(delivery_id, attempt + 1, delay)


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


def _embedded() -> EmbeddedDispatcher:
    global _dispatcher
    with _dispatcher_lock:
        if _dispatcher is None:
            _dispatcher = EmbeddedDispatcher()
        return _dispatcher
