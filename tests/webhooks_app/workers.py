"""Celery workers started as docs/webhooks.md ("The webhook worker") and docs/sandbox.md ("The
worker") say: the webhook worker consumes only the ``webhooks`` queue."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from django.conf import settings

from tests.conftest import worker_database_url
from tests.faults.processes import Process

WEBHOOK_QUEUES = "webhooks"
SANDBOX_QUEUES = "sandbox,celery"


def start_worker(
    log: Path, *, queues: str, concurrency: int, ready_marker: str = "ready.", **env: str
) -> Process:
    """A real ``celery worker -Q queues``, ready to take tasks."""
    environment = {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "REDIS_URL": str(settings.REDIS_URL),
        **env,
    }
    args = ["celery", "-A", "platform_site", "worker", "-Q", queues, "-c", str(concurrency),
            "--without-mingle", "--without-gossip", "-n", f"{log.stem}-{os.getpid()}@%h",
            "-l", "INFO"]  # fmt: skip
    worker = Process([sys.executable, "-m", *args], env=environment, log=log)
    deadline = time.monotonic() + 90
    while "ready." not in worker.log_text() or ready_marker not in worker.log_text():
        assert worker.alive(), worker.log_text()[-3000:]
        assert time.monotonic() < deadline, f"the worker did not start\n{worker.log_text()}"
        time.sleep(0.2)
    return worker


def start_webhook_worker(log: Path, *, port: int, concurrency: int = 1, **env: str) -> Process:
    """The webhook worker, allowed to reach a receiver on this machine's ``port``."""
    return start_worker(
        log, queues=WEBHOOK_QUEUES, concurrency=concurrency,
        DEV_ALLOW_PRIVATE_EGRESS="true", EGRESS_PORTS=str(port), **env,
    )  # fmt: skip
