"""Phone housekeeping (Celery beat, queue ``postcall``): thin; the services decide."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections

from sessions_app import services as session_services
from telephony_app import calls

logger = logging.getLogger(__name__)

HOUSEKEEPING_TASK = "telephony.housekeeping"  # settings.CELERY_BEAT_SCHEDULE


@shared_task(name=HOUSEKEEPING_TASK, ignore_result=True, acks_late=False)
def housekeeping() -> None:
    close_old_connections()
    housekeeping_run()


def housekeeping_run() -> None:
    """Calls that never streamed closed once no token could open one; expired session
    tokens (every call mints one) forgotten a day after."""
    waited = max(settings.PHONE_STREAM_TOKEN_TTL_S, settings.PHONE_OUTBOUND_TOKEN_TTL_S)
    closed = calls.calls_unconnected_close(older_than=timedelta(seconds=2 * waited))
    forgotten = session_services.session_tokens_expired_delete(older_than=timedelta(days=1))
    logger.info("phone housekeeping: calls closed=%d tokens forgotten=%d", closed, forgotten)
