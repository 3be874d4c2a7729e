"""Send mail later: a Celery task with Redis, a background thread on the embedded default."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from celery import Task
from django.db import close_old_connections

from core import backends

logger = logging.getLogger(__name__)

_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mail")


def _run(task: Task[..., Any], kwargs: dict[str, Any]) -> None:
    try:
        task.run(**kwargs)
    except Exception as exc:
        logger.error("mail task %s failed: %s", task.name, type(exc).__name__)
    finally:
        close_old_connections()


def send_later(task: Task[..., Any], **kwargs: Any) -> None:
    """Queue ``task``; the caller's answer never waits for it (nor for SMTP)."""
    if backends.mail_on_celery():
        task.delay(**kwargs)
    else:
        _thread.submit(_run, task, kwargs)


def wait_for_queued_mail(timeout: float = 10) -> None:
    """Until the background thread has sent everything queued so far (tests)."""
    _thread.submit(lambda: None).result(timeout)
