"""The delivery task: one attempt, then the next one is scheduled with its backoff."""

from __future__ import annotations

from celery import shared_task
from django.db import close_old_connections

from webhooks_app import dispatch, services


@shared_task(name="webhooks.deliver", ignore_result=True, acks_late=False)
def deliver(delivery_id: int, attempt: int) -> None:
    close_old_connections()
    delay = services.delivery_attempt(delivery_id=delivery_id, attempt=attempt)
    if delay is not None:
        dispatch.schedule(delivery_id, attempt + 1, delay)
