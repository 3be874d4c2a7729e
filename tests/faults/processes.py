"""Real processes for the fault tests: a private redis-server, daphne, a Celery worker.

Every platform here gets its own redis-server on a free port (the shared Redis other
tests use is never touched, so a fault here cannot disturb them) and its own SQLite
database under a temporary ``VAR_DIR``, which daphne and the worker share the way the
embedded defaults do. Tests kill these processes on purpose; each helper kills only the
process (group) it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

ROOT = Path(__file__).resolve().parents[2]
REDIS_SERVER = "/usr/bin/redis-server"
LOCAL_ORIGIN = "http://localhost:3000"  # a key without allowed origins accepts localhost
_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
_worker_numbers = itertools.count(1)
# The fault tests configure their sessions inline (new keys refuse that by default).
INLINE = ("--inline-config", "--inline-tool-code")
# As deployed (Dockerfile, dev.sh): Twisted's default listen backlog is 50 connections.
LISTEN_BACKLOG = 1024


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def require_redis_server() -> None:
    if Path(REDIS_SERVER).exists():
        return
    reason = f"{REDIS_SERVER} is missing (apt-get install redis-server)"
    if _CI:
        pytest.fail(f"{reason}; under CI this must not be skipped", pytrace=False)
    pytest.skip(reason)


def wait_for(check: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


async def until(check: Callable[[], bool], *, timeout: float, what: str) -> float:
    """Wait (without blocking the loop) until ``check()``; returns when it became true."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
    return time.monotonic()


class Process:
    """A child process in its own process group, logging to a file."""

    def __init__(self, args: list[str], *, env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("ab") as output:  # the child keeps its own copy of the descriptor
            self.popen = subprocess.Popen(
                args, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def children(self) -> list[int]:
        path = Path(f"/proc/{self.pid}/task/{self.pid}/children")
        with contextlib.suppress(OSError):
            return [int(pid) for pid in path.read_text().split()]
        return []

    def kill(self) -> None:
        """SIGKILL the main process only, as the OOM killer or a crash would."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.popen.wait(10)

    def stop(self, timeout: float = 15) -> None:
        """Stop the whole group: SIGTERM, then SIGKILL for whatever is left."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.popen.wait(10)


def celery_worker(queue: str, *, env: dict[str, str], log: Path) -> Process:
    """A Celery worker consuming ``queue`` only (one task at a time), once it is ready."""
    args = ["celery", "-A", "platform_site", "worker", "-Q", queue, "-c", "1",
            "--without-mingle", "--without-gossip", "-l", "INFO"]  # fmt: skip
    worker = Process([sys.executable, "-m", *args], env=env, log=log)
    deadline = time.monotonic() + 60
    while "ready." not in worker.log_text():
        assert worker.alive(), worker.log_text()[-3000:]
        assert time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.2)
    return worker


class RedisServer:
    """A throwaway redis-server: no persistence, its own port."""

    def __init__(self, log_dir: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self._log_dir = log_dir
        self.process: Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        require_redis_server()
        args = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--daemonize", "no"]  # fmt: skip
        self.process = Process(args, env=dict(os.environ), log=self._log_dir / "redis.log")
        wait_for(self.ping, timeout=10, what="redis-server")
        return self

    def ping(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
            return True
        return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None


@dataclass
class Platform:
    """Settings and a workspace shared by the daphne and worker processes of one test module."""

    var_dir: Path
    env: dict[str, str]
    publishable_key: str
    outsider_key: str  # another workspace's publishable key
    secret_key: str = ""  # the workspace's all-scopes secret key

    def process_env(self, **extra: str) -> dict[str, str]:
        return {**self.env, **extra}


def prepare_platform(var_dir: Path, *, redis_url: str, llm_base_url: str) -> Platform:
    drop = {"DATABASE_URL", "REDIS_URL", "METRICS_TOKEN", "CI"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("LLM_")}
    env.update(
        VAR_DIR=str(var_dir),
        DEBUG="true",
        REDIS_URL=redis_url,
        LLM_BASE_URL=llm_base_url,
        LLM_API_KEY="fault-test-llm-key",
        ALLOW_FAKE_PROVIDERS="true",  # the scripted speech below
        STT_PROVIDER="fake",
        TTS_PROVIDER="fake",
        PYTHONUNBUFFERED="1",
    )
    _copy_migrated_database(var_dir, env)
    keys = [
        json.loads(line)
        for line in _manage(env, "shell", "-v", "0", "-c", _TWO_WORKSPACES).splitlines()
    ]
    return Platform(
        var_dir,
        env,
        keys[0]["publishable_key"],
        keys[1]["publishable_key"],
        secret_key=keys[0]["secret_key"],
    )


# Both workspaces from one process (each Django start costs seconds on a busy machine).
_TWO_WORKSPACES = f"""
from django.core.management import call_command
for name, email in (("Faults", "f@example.com"), ("Outsider", "o@example.com")):
    call_command("create_workspace", name, "--owner", email, "--json", *{INLINE!r})
"""


def _copy_migrated_database(var_dir: Path, env: dict[str, str]) -> None:
    """A freshly migrated SQLite database (and the keyring beside it) in ``var_dir``:
    migrated once per test process next to the tests' temporary directories, then copied."""
    template = var_dir.parent / "migrated-platform"
    if not (template / "migrated").exists():
        template.mkdir(exist_ok=True)
        _manage({**env, "VAR_DIR": str(template)}, "migrate", "--noinput", "-v", "0")
        (template / "migrated").touch()
    for name in ("platform.sqlite3", "secrets_keyring"):
        if (template / name).exists():
            shutil.copy2(template / name, var_dir / name)


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


class Daphne(Process):
    def __init__(self, platform: Platform, name: str = "daphne") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        endpoint = f"tcp:port={self.port}:interface=127.0.0.1:backlog={LISTEN_BACKLOG}"
        args = [sys.executable, "-m", "daphne", "-e", endpoint, "platform_site.asgi:application"]
        super().__init__(args, env=platform.env, log=platform.var_dir / f"{name}.log")
        wait_for(self._healthy, timeout=60, what=f"daphne to serve /healthz\n{self.log_text()}")

    def _healthy(self) -> bool:
        assert self.alive(), self.log_text()[-3000:]
        return self.healthz() == 200

    def healthz(self) -> int | None:
        try:
            return httpx.get(f"{self.url}/healthz", timeout=3).status_code
        except httpx.HTTPError:
            return None

    def session_url(self, key: str) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/session?key={key}"


class Worker(Process):
    """A sandbox worker: a prefork pool of one child, deployed as docs/sandbox.md's "The
    worker" says."""

    def __init__(self, platform: Platform, *, egress_port: int) -> None:
        name = f"worker-{next(_worker_numbers)}"
        env = platform.process_env(DEV_ALLOW_PRIVATE_EGRESS="true", EGRESS_PORTS=str(egress_port))
        args = [sys.executable, "-m", "celery", "-A", "platform_site", "worker", "-Q", "sandbox",
                "-c", "1", "-l", "INFO", "--without-mingle", "--without-gossip",
                "--without-heartbeat", "-n", f"{name}-{os.getpid()}@%h"]  # fmt: skip
        super().__init__(args, env=env, log=platform.var_dir / f"{name}.log")
        wait_for(self._ready, timeout=60, what=f"the worker to start\n{self.log_text()}")

    def _ready(self) -> bool:
        assert self.alive(), self.log_text()[-3000:]
        return "ready." in self.log_text()


class SessionClient:
    """A browser's WebSocket to a real daphne: JSON events collected, audio ignored."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self.close_code: int | None = None

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, url: str) -> Any:
        async with connect(url, origin=LOCAL_ORIGIN, proxy=None, open_timeout=10) as ws:  # type: ignore[arg-type]
            yield cls(ws)

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(message))

    async def next(self, timeout: float) -> dict[str, Any] | None:
        """The next JSON event; None once the server closed the socket."""
        while True:
            try:
                frame = await asyncio.wait_for(self.ws.recv(), timeout)
            except ConnectionClosed as closed:
                self.close_code = closed.rcvd.code if closed.rcvd else None
                return None
            if isinstance(frame, str):
                event: dict[str, Any] = json.loads(frame)
                self.events.append(event)
                return event

    async def until(self, event_type: str, timeout: float = 10) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while (event := await self.next(max(0.01, deadline - time.monotonic()))) is not None:
            if event.get("type") == event_type:
                return event
        raise AssertionError(f"closed ({self.close_code}) before {event_type!r}: {self.events}")

    async def drain(self, seconds: float) -> None:
        """Collect whatever arrives in the next ``seconds``."""
        deadline = time.monotonic() + seconds
        with contextlib.suppress(TimeoutError):
            while time.monotonic() < deadline:
                if await self.next(max(0.01, deadline - time.monotonic())) is None:
                    return

    def types(self) -> list[str]:
        return [str(event.get("type")) for event in self.events]

    def of_type(self, event_type: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event.get("type") == event_type]
