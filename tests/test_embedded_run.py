"""The first command (`./dev.sh`, README.md and docs/development.md), in a fresh clone,
serves /healthz and the admin login."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect
from websockets.typing import Origin

ROOT = Path(__file__).resolve().parent.parent


def _wait_for(url: str, deadline: float) -> httpx.Response:
    while time.monotonic() < deadline:
        try:
            return httpx.get(url, timeout=2)
        except httpx.HTTPError:
            time.sleep(0.5)
    raise AssertionError(f"{url} did not answer in time")


@pytest.mark.slow
# The test's own waits bound it (clone, first start with its install, a turn, the stop); the
# suite-wide 120 s would cut a first start that is slow because the machine is busy.
@pytest.mark.timeout(60 + 240 + 60 + 20)
def test_dev_command_serves_health_and_admin_in_a_fresh_clone(tmp_path, unused_tcp_port):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=60)
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "CI"}}
    env["PORT"] = str(unused_tcp_port)
    log = (tmp_path / "dev.log").open("w")
    process = subprocess.Popen(
        ["./dev.sh"], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{unused_tcp_port}"
        health = _wait_for(f"{base}/healthz", time.monotonic() + 240)
        assert health.status_code == 200
        checks = health.json()
        assert {k: checks[k] for k in ("db", "redis", "sandbox")} == {
            "db": "ok",
            "redis": "not configured",
            "sandbox": "ok",
        }
        assert checks["sandbox_protections"]["syscall_filter"] is True
        # The admin logs in through the dashboard's (throttled, two-factor) login.
        login = httpx.get(f"{base}/admin/login/", timeout=5, follow_redirects=True)
        assert login.status_code == 200 and b"Email address" in login.content
        assert login.url.path == "/login/" and login.url.params["next"] == "/admin/"
        printed = (tmp_path / "dev.log").read_text()
        assert "Publishable key:  pk_" in printed and "Secret key:       sk_" in printed
        assert "LLM_BASE_URL=http://127.0.0.1:11434/v1" in printed  # how to add a local LLM
        key = re.search(r"Publishable key:\s+(pk_\S+)", printed)
        assert key is not None
        _speaks_offline(f"ws://127.0.0.1:{unused_tcp_port}/v1/session?key={key[1]}")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)


def _speaks_offline(url: str) -> None:
    """A voice-mode turn on the embedded defaults: the offline voice answers out loud."""
    with connect(url, origin=Origin("http://localhost:8000"), open_timeout=10) as ws:
        ws.send(json.dumps({"type": "configure", "mode": "voice"}))
        ws.send(json.dumps({"type": "text", "text": "hello"}))
        audio, events = 0, []
        while "tts_done" not in events:
            frame = ws.recv(timeout=60)
            if isinstance(frame, bytes):
                audio += len(frame)
            else:
                events.append(json.loads(frame)["type"])
    assert events[0] == "ready" and "chat" in events and "error" not in events
    assert audio / 48_000 >= 0.5  # seconds of 24 kHz speech
