"""The platform on its embedded defaults (SQLite, in-memory channel layer, sandbox worker
processes, offline Whisper and Piper) in a daphne subprocess, with a workspace, for the
whole-call test and ``bench/phone.py``; and the signed voice webhook that answers a call."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

from tests.telephony_app.carrier import twilio_signature, twilio_voice_form

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Platform:
    url: str
    secret_key: str
    env: dict[str, str]
    log: Path
    publishable_key: str = ""

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        answer = httpx.request(
            method, f"{self.url}/api/v1/{path}", json=body, timeout=30,
            headers={"Authorization": f"Bearer {self.secret_key}"},
        )  # fmt: skip
        assert answer.status_code < 300, answer.text
        return answer.json() if answer.content else None

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def answer_call(self, voice_url: str, call_sid: str, caller: str) -> str:
        """The carrier's signed voice webhook for an incoming call; the TwiML answer."""
        form = twilio_voice_form(call_sid, caller=caller, to="+14155550100")
        answer = httpx.post(
            voice_url, content=urlencode(form), timeout=30,
            headers={"Content-Type": "application/x-www-form-urlencoded",
                     "X-Twilio-Signature": twilio_signature(voice_url, form)},
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        return answer.text


@contextlib.contextmanager
def running_platform(folder: Path, **settings: str) -> Iterator[Platform]:
    """daphne on a free port, its data under ``folder``; ``settings`` go to its environment."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "CI"}}
    env.update(
        VAR_DIR=str(folder), DEBUG="true", STT_PROVIDER="local", TTS_PROVIDER="local",
        DEV_ALLOW_PRIVATE_EGRESS="true", PUBLIC_URL=f"http://127.0.0.1:{port}", **settings,
    )  # fmt: skip
    platform = Platform(f"http://127.0.0.1:{port}", "", env, folder / "daphne.log")
    platform.manage("migrate", "--noinput", "-v", "0")
    keys = json.loads(
        platform.manage("create_workspace", "Phone", "--owner", "p@example.com", "--json")
    )
    platform.secret_key, platform.publishable_key = keys["secret_key"], keys["publishable_key"]
    with platform.log.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
             "platform_site.asgi:application"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{platform.url}/healthz", timeout=2).status_code == 200:
                    break
            assert process.poll() is None, platform.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "daphne did not start"
            time.sleep(0.3)
        yield platform
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
