"""A real Redis Cluster for the tests: three masters (``redis-server --cluster-enabled yes``)
on loopback ports, joined with ``redis-cli --cluster create``, no persistence.

Ports are free ones whose cluster-bus port (port + 10000) is free too, so parallel test
workers and other engineers' servers never clash. Skipped where ``redis-server`` is
missing, failed under CI (as tests/conftest.py does for the other services).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

MASTERS = 3
_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _cluster_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + 10000 < 65536 and _free(port + 10000) and port not in ports:
            ports.append(port)
    return ports


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
        return True
    return False


def _require_binaries() -> tuple[str, str]:
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server and cli:
        return server, cli
    reason = "redis-server and redis-cli are needed for the Redis Cluster tests"
    if _CI:
        pytest.fail(f"{reason}; under CI this must not be skipped", pytrace=False)
    pytest.skip(reason)


@contextlib.contextmanager
def redis_cluster(workdir: Path) -> Iterator[str]:
    """Start the cluster; yields its ``redis+cluster://`` URL (every master a start-up node)."""
    server, cli = _require_binaries()
    ports = _cluster_ports(MASTERS)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for port in ports:
            node = workdir / f"node-{port}"
            node.mkdir()
            args = [server, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled",
                    "yes", "--cluster-config-file", str(node / "nodes.conf"),
                    "--cluster-node-timeout", "2000", "--save", "", "--appendonly", "no",
                    "--dir", str(node)]  # fmt: skip
            with (node / "redis.log").open("wb") as log:
                processes.append(
                    subprocess.Popen(
                        args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                    )
                )
        deadline = time.monotonic() + 15
        while not all(_answers(port) for port in ports):
            assert time.monotonic() < deadline, "the cluster's redis-servers did not start"
            time.sleep(0.05)
        nodes = [f"127.0.0.1:{port}" for port in ports]
        created = subprocess.run(
            [cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert created.returncode == 0, created.stdout[-2000:] + created.stderr[-2000:]
        _wait_until_ok(cli, ports[0])
        yield "redis+cluster://" + ",".join(nodes)
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def _wait_until_ok(cli: str, port: int) -> None:
    deadline = time.monotonic() + 20
    while True:
        info = subprocess.run(
            [cli, "-p", str(port), "cluster", "info"], capture_output=True, text=True, timeout=5
        ).stdout
        if "cluster_state:ok" in info:
            return
        assert time.monotonic() < deadline, info
        time.sleep(0.1)
