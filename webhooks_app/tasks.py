"""The delivery task (queue ``webhooks``, its own worker): one attempt, in the slot of its
workspace's taken when it was queued, then the next one is scheduled after its backoff. An
attempt over its workspace's cap is parked, not queued (``in_flight``); each webhook worker
sweeps the parked attempts now and then, so that none waits for ever on a slot a dead
worker held."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import close_old_connections

from core import in_flight as core_in_flight
from webhooks_app import dispatch, in_flight, services

logger = logging.getLogger(__name__)

QUEUE = "webhooks"


@shared_task(name="webhooks.deliver", ignore_result=True, acks_late=False)
def deliver(delivery_id: int, attempt: int, slot: str | None = None) -> None:
    close_old_connections()
    following = services.delivery_attempt(delivery_id=delivery_id, attempt=attempt, slot=slot)
    if following is not None:
        dispatch.schedule(delivery_id, following.attempt, following.delay_s)


def sweep_parked() -> int:
    """Queue the parked attempts of every workspace that has free slots; how many."""
    unparked = in_flight.sweep()
    for parked, slot in unparked:
        dispatch.schedule(parked.delivery_id, parked.attempt, 0.0, slot=slot)
    return len(unparked)


@worker_ready.connect
def _start_sweeper(sender: Any = None, **_: Any) -> None:
    """A webhook worker (one that consumes ``webhooks``) sweeps in its main process."""
    core_in_flight.start_sweeper(
        sender, queue=QUEUE, every_s=lambda: float(settings.WEBHOOK_PARKED_SWEEP_S),
        sweep=sweep_parked,
    )  # fmt: skip
