"""What the load benchmark runs against, and how it reads the processes' CPU and memory.

``Stack`` owns everything the benchmark starts: a Postgres database of its own (created,
migrated, dropped), one Redis database number (flushed before and after, never another),
the fake LLM process, daphne web processes and Celery workers. Each child runs in its own
session (process group), so a Ctrl-C in the terminal reaches only the benchmark, which
then stops them itself; ``close`` is safe to call twice and after a partial start.

CPU and memory come from /proc (no psutil): utime+stime of every process of a group plus
what its leader collected from children that exited (a Celery child recycled mid-run
keeps counting), and VmRSS summed over the group.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import redis

ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PROBLEM = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b|^Traceback")

# ---------------------------------------------------------------- /proc


def _stat_fields(pid: int, thread: int | None = None) -> list[str]:
    """/proc/<pid>/stat (or one thread's) from field 3 on (the command name may hold spaces
    and parens)."""
    data = Path(f"/proc/{pid}" + (f"/task/{thread}" if thread else "") + "/stat").read_text()
    return data[data.rindex(")") + 2 :].split()


def group_members(leaders: list[int]) -> dict[int, list[int]]:
    """The live processes of each process group, from one pass over /proc."""
    members: dict[int, list[int]] = {leader: [] for leader in leaders}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                group = int(_stat_fields(int(entry))[2])
                if group in members:
                    members[group].append(int(entry))
    return members


def cpu_seconds(pid: int, *, with_reaped_children: bool = False) -> float:
    try:
        fields = _stat_fields(pid)
    except (OSError, IndexError):
        return 0.0  # it just exited
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if with_reaped_children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / CLOCK_TICKS


def thread_cpu_seconds(pid: int) -> dict[int, float]:
    """utime+stime of each live thread of ``pid``, by OS thread id."""
    spent = {}
    with contextlib.suppress(OSError):
        for thread in map(int, os.listdir(f"/proc/{pid}/task")):
            with contextlib.suppress(OSError, IndexError):
                fields = _stat_fields(pid, thread)
                spent[thread] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return spent


def group_cpu_seconds(leader: int, pids: list[int]) -> float:
    """A group's CPU time; its leader's reaped children count (a recycled Celery child)."""
    return sum(cpu_seconds(pid, with_reaped_children=pid == leader) for pid in pids)


def runqueue_wait_s(pid: int) -> float:
    """How long the main thread of ``pid`` has waited, runnable, for a CPU (another task
    held it): /proc/<pid>/schedstat's second field (needs schedstats, as Linux has by
    default; 0.0 without)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def rss_kb(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def machine_cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # guest time is already inside user
    return total - idle, total


@dataclass(frozen=True)
class Reading:
    """CPU seconds and RSS of each child's process group (and of this process, under its
    own pid) at one moment, with the whole machine's and Redis's CPU counters."""

    at: float  # time.monotonic()
    cpu_s: dict[int, float]
    rss_kb: dict[int, int]
    machine: tuple[int, int]
    redis_cpu_s: float | None  # all the servers together
    # Per role (one "all" when the roles share a server): calls of each command so far.
    redis_calls: dict[str, dict[str, int]] = field(default_factory=dict)
    redis_memory_mb: dict[str, float] = field(default_factory=dict)
    # The benchmark database's counters (pg_stat_database): commits, rows written.
    postgres: dict[str, int] = field(default_factory=dict)
    # Each group leader's main thread: seconds it waited, runnable, for a CPU.
    runqueue_wait_s: dict[int, float] = field(default_factory=dict)


def postgres_counters(database_url: str) -> dict[str, int]:
    try:
        with psycopg.connect(database_url, connect_timeout=2) as db:
            row = db.execute(
                "SELECT xact_commit, tup_inserted, tup_updated, tup_deleted "
                "FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()
    except psycopg.Error:
        return {}
    if row is None:
        return {}
    return dict(zip(("commits", "inserted", "updated", "deleted"), map(int, row), strict=True))


def take_reading(
    leaders: list[int], redis_urls: dict[str, str], database_url: str | None = None
) -> Reading:
    members = group_members(leaders)
    cpu = {leader: group_cpu_seconds(leader, pids) for leader, pids in members.items()}
    rss = {leader: sum(rss_kb(pid) for pid in pids) for leader, pids in members.items()}
    me = os.getpid()
    cpu[me], rss[me] = cpu_seconds(me), rss_kb(me)
    redis_cpu: float | None = 0.0
    calls: dict[str, dict[str, int]] = {}
    memory: dict[str, float] = {}
    for role, url in redis_urls.items():
        try:
            with redis.Redis.from_url(url, socket_timeout=1) as client:
                info = client.info("everything")
            if redis_cpu is not None:
                redis_cpu += float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
            calls[role] = {
                name.removeprefix("cmdstat_"): int(value["calls"])
                for name, value in info.items()
                if name.startswith("cmdstat_") and isinstance(value, dict)
            }
            memory[role] = round(int(info["used_memory"]) / 2**20, 1)
        except (redis.RedisError, KeyError):
            redis_cpu = None
    postgres = postgres_counters(database_url) if database_url else {}
    waits = {leader: runqueue_wait_s(leader) for leader in leaders}
    return Reading(
        time.monotonic(), cpu, rss, machine_cpu_ticks(), redis_cpu, calls, memory, postgres,
        waits,
    )  # fmt: skip


# ---------------------------------------------------------------- the stack

APPLICATION = "platform_site.asgi:application"
# The ASGI servers the benchmark can run the same application under (``--server``).
SERVERS = ("daphne", "daphne-uvloop", "uvicorn", "granian")


def server_command(server: str, port: int) -> list[str]:
    """The command line of one web process on ``port`` under ``server``."""
    if server == "daphne":
        return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), APPLICATION]
    if server == "daphne-uvloop":  # Twisted's asyncio reactor on a uvloop event loop
        launch = ("import asyncio, sys, uvloop; asyncio.set_event_loop_policy("
                  "uvloop.EventLoopPolicy()); from daphne.cli import CommandLineInterface; "
                  "sys.argv[0] = 'daphne'; CommandLineInterface.entrypoint()")  # fmt: skip
        return [sys.executable, "-c", launch, "-b", "127.0.0.1", "-p", str(port), APPLICATION]
    if server == "uvicorn":  # with daphne's WebSocket limits, and no compression
        return [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port),
                "--loop", "uvloop", "--http", "httptools", "--ws", "websockets",
                "--ws-max-size", str(2**20), "--ws-per-message-deflate", "false",
                "--ws-ping-interval", "20", "--ws-ping-timeout", "30", "--lifespan", "off",
                "--no-proxy-headers", "--no-server-header", "--no-access-log",
                APPLICATION]  # fmt: skip
    if server == "granian":
        return [sys.executable, "-m", "granian", "--interface", "asginl", "--host", "127.0.0.1",
                "--port", str(port), "--loop", "uvloop", "--workers", "1",
                "--runtime-threads", "1", "--log-level", "warning", APPLICATION]  # fmt: skip
    raise ValueError(f"unknown server {server!r}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Child:
    role: str  # "web", "worker", "fake_llm"
    process: subprocess.Popen[bytes]
    log: Path
    port: int | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def problems(self) -> list[str]:
        """Warning, error and traceback lines the process logged (none is logged per frame)."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return []
        found = []
        for line, after in zip(lines, [*lines[1:], ""][: len(lines)], strict=True):
            if _PROBLEM.search(line):
                # asyncio names the task on the next line
                found.append((line + (" " + after if after.startswith("task:") else ""))[:300])
        return found

    def tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-2000:]
        return ""


@dataclass
class Stack:
    redis_url_base: str
    redis_db: int
    postgres_url: str
    worker_concurrency: int = 1
    session_limit: int = 100_000
    web_cpu: int | None = None  # pin the daphne processes to this CPU
    redis_per_role: bool = False  # a redis-server of its own per role (started here)
    role_ports: dict[str, int] = field(default_factory=dict)
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="bench-load-")))
    database: str = field(default_factory=lambda: f"bench_load_{os.getpid()}")
    children: list[Child] = field(default_factory=list)
    llm_base_url: str = ""
    publishable_key: str = ""
    _database_created: bool = False

    @property
    def redis_url(self) -> str:
        return f"{self.redis_url_base.rstrip('/')}/{self.redis_db}"

    @property
    def database_url(self) -> str:
        return f"{self.postgres_url.rstrip('/')}/{self.database}"

    @property
    def redis_urls(self) -> dict[str, str]:
        """The Redis of each role the benchmark reads commandstats from."""
        if not self.role_ports:
            return {"all": self.redis_url}
        return {role: f"redis://127.0.0.1:{port}/0" for role, port in self.role_ports.items()}

    def _role_env(self) -> dict[str, str]:
        urls = self.redis_urls if self.role_ports else {}
        names = {"channel_layer": "CHANNEL_LAYER_URL", "session_state": "SESSION_STATE_URL",
                 "counters": "COUNTERS_URL", "broker": "CELERY_BROKER_URL"}  # fmt: skip
        return {names[role]: url for role, url in urls.items()}

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
        env.update(
            DJANGO_SETTINGS_MODULE="platform_site.settings",
            DEBUG="true",
            LOG_LEVEL="WARNING",
            REDIS_URL=self.redis_url,
            DATABASE_URL=self.database_url,
            VAR_DIR=str(self.tmp / "var"),
            ALLOW_FAKE_PROVIDERS="true",  # the scripted speech below
            STT_PROVIDER="fake",
            TTS_PROVIDER="fake",
            TOOL_RUNNER="sandbox",
            LLM_BASE_URL=self.llm_base_url,
            LLM_API_KEY="sk-bench",
            SESSION_LIMIT_PER_WORKSPACE=str(self.session_limit),
            # Every simulated client comes from this machine's one address.
            SESSIONS_PER_ADDRESS=str(self.session_limit),
            WS_CONNECTIONS_PER_MINUTE=str(self.session_limit * 10),
            LLM_REQUESTS_PER_MINUTE="100000",
            PYTHONUNBUFFERED="1",
        )
        env.update(self._role_env())
        return env

    # ------------------------------------------------------------ once per benchmark

    def prepare(self) -> None:
        """Database, migrations, a workspace key and the fake LLM (and the roles' Redis)."""
        if self.redis_per_role:
            self._start_role_redis()
        self.flush_redis()
        with psycopg.connect(f"{self.postgres_url.rstrip('/')}/postgres", autocommit=True) as db:
            db.execute(f'CREATE DATABASE "{self.database}"')
        self._database_created = True
        self._manage("migrate", "--noinput", "-v", "0")
        created = self._manage(
            "create_workspace",
            "Bench",
            "--owner",
            "bench@example.com",
            "--json",
            "--inline-config",
            "--inline-tool-code",
        )
        self.publishable_key = json.loads(created.strip().splitlines()[-1])["publishable_key"]
        self._start_llm()

    def _manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT, env=self.env(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed:\n{done.stderr[-2000:]}")
        return done.stdout

    def _start_llm(self) -> None:
        child = self._spawn("fake_llm", [sys.executable, str(ROOT / "bench" / "load_llm.py")])
        deadline = time.monotonic() + 30
        while "fake LLM on " not in (text := child.log.read_text()):
            self._check_alive(child, deadline)
            time.sleep(0.05)
        self.llm_base_url = text.split("fake LLM on ", 1)[1].split()[0]

    def _start_role_redis(self) -> None:
        for role in ("channel_layer", "session_state", "counters", "broker"):
            port = free_port()
            command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                       "--save", "", "--appendonly", "no"]  # fmt: skip
            self._spawn(f"redis_{role}", command)
            self.role_ports[role] = port
        deadline = time.monotonic() + 30
        for role, url in self.redis_urls.items():
            while True:
                try:
                    with redis.Redis.from_url(url, socket_timeout=1) as client:
                        client.ping()
                    break
                except redis.RedisError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"redis for {role} did not start") from None
                    time.sleep(0.05)

    def flush_redis(self) -> None:
        for url in {self.redis_url, *self.redis_urls.values()}:
            with contextlib.suppress(redis.RedisError), redis.Redis.from_url(url) as client:
                client.flushdb()

    # ------------------------------------------------------------ once per run

    def start_web(self, count: int, server: str = "daphne") -> list[Child]:
        webs = []
        for _ in range(count):
            port = free_port()
            command = server_command(server, port)
            if self.web_cpu is not None:
                command = ["taskset", "-c", str(self.web_cpu), *command]
            webs.append(self._spawn("web", command, port=port))
        deadline = time.monotonic() + 60
        for web in webs:
            while not _healthy(web.port):
                self._check_alive(web, deadline)
                time.sleep(0.2)
        return webs

    def start_workers(self) -> list[Child]:
        command = [
            sys.executable, "-m", "celery", "-A", "platform_site", "worker", "-Q", "sandbox",
            "-c", str(self.worker_concurrency), "-l", "INFO", "--without-mingle",
            "--without-gossip",
        ]  # fmt: skip
        worker = self._spawn("worker", command)
        deadline = time.monotonic() + 60
        while "ready." not in worker.log.read_text(errors="replace"):
            self._check_alive(worker, deadline)
            time.sleep(0.2)
        return [worker]

    def stop(self, children: list[Child]) -> None:
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
        for child in children:
            try:
                child.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.process.wait(timeout=10)
            # A Celery child the leader could not reap still belongs to the group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            if child in self.children:
                self.children.remove(child)

    @contextlib.contextmanager
    def running(self) -> Iterator[Stack]:
        """Stops everything at the end (blocking: nothing may cancel it); keeps the logs
        when the benchmark failed."""
        finished = False
        try:
            yield self
            finished = True
        finally:
            self.close(keep_logs=not finished)

    def close(self, *, keep_logs: bool = False) -> None:
        self.stop(list(self.children))
        if keep_logs:
            print(f"load: the processes' logs are in {self.tmp}", file=sys.stderr)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        with contextlib.suppress(Exception):
            self.flush_redis()
        if self._database_created:
            url = f"{self.postgres_url.rstrip('/')}/postgres"
            with psycopg.connect(url, autocommit=True) as db:
                db.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
            self._database_created = False

    # ------------------------------------------------------------ helpers

    def _spawn(self, role: str, command: list[str], *, port: int | None = None) -> Child:
        log = self.tmp / f"{role}-{len(self.children)}-{time.monotonic_ns()}.log"
        process = subprocess.Popen(
            command, cwd=ROOT, env=self.env(), stdout=log.open("wb"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        child = Child(role=role, process=process, log=log, port=port)
        self.children.append(child)
        return child

    @staticmethod
    def _check_alive(child: Child, deadline: float) -> None:
        if child.process.poll() is not None:
            raise RuntimeError(
                f"{child.role} exited with {child.process.returncode}:\n{child.tail()}"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(f"{child.role} did not start in time:\n{child.tail()}")


def _healthy(port: int | None) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False
