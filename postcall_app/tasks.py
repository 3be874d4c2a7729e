"""Post-call tasks (queue ``postcall``): load by id, call the service."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import close_old_connections

from postcall_app import analysis, dispatch, retention

logger = logging.getLogger(__name__)

RETENTION_TASK = "postcall.retention_purge"  # run by Celery beat (settings.CELERY_BEAT_SCHEDULE)
SWEEP_TASK = "postcall.analysis_sweep"  # likewise


@shared_task(name=dispatch.ANALYSIS_TASK, ignore_result=True, acks_late=False)
def analysis_run(analysis_id: int) -> None:
    close_old_connections()
    analysis.analysis_run(analysis_id=analysis_id)


@shared_task(name=RETENTION_TASK, ignore_result=True, acks_late=False)
def retention_purge() -> None:
    close_old_connections()
    purged = retention.retention_purge()
    logger.info("retention purge: %s workspaces had records deleted", len(purged))


@shared_task(name=SWEEP_TASK, ignore_result=True, acks_late=False)
def analysis_sweep() -> None:
    close_old_connections()
    ended = analysis.analysis_sweep()
    if ended:
        logger.warning("analysis sweep: %s analyses lost their task and were ended", ended)
