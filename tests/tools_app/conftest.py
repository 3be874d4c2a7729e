"""The real Celery sandbox worker the tests of this package start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.conftest import worker_database_url

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker(tmp_path):
    def start(egress_port: int, concurrency: int = 1) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "DATABASE_URL": worker_database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "DEV_ALLOW_PRIVATE_EGRESS": "true",
            "EGRESS_PORTS": str(egress_port),
        }
        log = tmp_path / "worker.log"
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "platform_site",
                "worker",
                "-Q",
                "sandbox",
                "-c",
                str(concurrency),
                "-l",
                "INFO",
                "--without-mingle",
                "--without-gossip",
            ],
            cwd=ROOT,
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        started.append(process)
        deadline = time.monotonic() + 60
        # Ready once every task process has its jailed worker up.
        while (
            "ready." not in log.read_text()
            or log.read_text().count("sandbox worker protections") < concurrency
        ):
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "worker did not start"
            time.sleep(0.2)
        return process

    started: list[subprocess.Popen[bytes]] = []
    yield start
    for process in started:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
