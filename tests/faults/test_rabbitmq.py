"""Tool calls through Celery on RabbitMQ (``CELERY_BROKER_URL=amqp://…``), the broker
Celery deployments at scale use, while Redis keeps the channel layer and the counters.

Real processes: RabbitMQ on 127.0.0.1:5672 (a virtual host of this test's own, made with
``rabbitmqctl`` and deleted after), a private redis-server, daphne and a sandbox worker.
Skipped with the reason where RabbitMQ is not there; under CI that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis

from tests.engine.providers.llm.openai.fake_server import (
    Done,
    FakeOpenAIServer,
    Finish,
    text_reply,
    tool_call,
)
from tests.faults.processes import (
    Daphne,
    Platform,
    RedisServer,
    SessionClient,
    Worker,
    free_port,
    prepare_platform,
)

pytestmark = [pytest.mark.slow]

RABBITMQ = ("127.0.0.1", 5672)
_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _unavailable(reason: str) -> None:
    if _CI:
        pytest.fail(f"{reason}; under CI this must not be skipped", pytrace=False)
    pytest.skip(reason)


def _rabbitmqctl(*args: str) -> None:
    result = subprocess.run(
        ["rabbitmqctl", *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.fixture(scope="module")
def vhost() -> Iterator[str]:
    """A RabbitMQ virtual host of this test's own (its queues meet nobody else's)."""
    try:
        socket.create_connection(RABBITMQ, 2).close()
    except OSError:
        _unavailable("RabbitMQ is not listening on 127.0.0.1:5672")
    if shutil.which("rabbitmqctl") is None:
        _unavailable("rabbitmqctl is missing (a virtual host of the test's own is needed)")
    name = f"voice-test-{uuid.uuid4().hex[:10]}"
    _rabbitmqctl("add_vhost", name)
    try:
        _rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
        yield name
    finally:
        _rabbitmqctl("delete_vhost", name)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, vhost: str
) -> Iterator[tuple[Platform, Daphne, Worker, RedisServer, int]]:
    var = tmp_path_factory.mktemp("rabbitmq")
    redis_server = RedisServer(var).start()
    llm_port = free_port()
    platform = prepare_platform(
        var, redis_url=redis_server.url, llm_base_url=f"http://127.0.0.1:{llm_port}/v1"
    )
    platform.env["CELERY_BROKER_URL"] = f"amqp://guest:guest@{RABBITMQ[0]}:{RABBITMQ[1]}/{vhost}"
    daphne = Daphne(platform)
    worker = Worker(platform, egress_port=free_port())
    try:
        yield platform, daphne, worker, redis_server, llm_port
    finally:
        worker.stop()
        daphne.stop()
        redis_server.stop()


@pytest.fixture
async def llm(stack: Any) -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(port=stack[4]) as server:
        yield server


async def test_a_server_tool_runs_through_rabbitmq(stack: Any, llm: FakeOpenAIServer) -> None:
    platform, daphne, worker, redis_server, _ = stack
    double = {"name": "double", "parameters": {"n": "number"},
              "handler": "async (args) => ({doubled: args.n * 2})"}  # fmt: skip
    llm.script(*tool_call(0, "call_1", "double", json.dumps({"n": 21})), Finish("tool_calls"),
               Done())  # fmt: skip
    llm.script(text_reply("It is 42."))
    async with SessionClient.open(daphne.session_url(platform.publishable_key)) as client:
        await client.send({"type": "configure", "mode": "text", "tools": [double]})
        await client.until("ready")
        await client.send({"type": "text", "text": "Double 21"})
        assert (await client.until("chat", timeout=30))["text"] == "It is 42."
    statuses = [event["status"] for event in client.of_type("tool_status")]
    assert statuses == ["started", "completed"]
    (told,) = [m for m in llm.requests[-1].json["messages"] if m.get("tool_call_id") == "call_1"]
    assert json.loads(told["content"]) == {"doubled": 42}
    # The call went through RabbitMQ: the worker consumed from it, Redis held no queue.
    assert (
        f"amqp://guest:**@127.0.0.1:5672/{platform.env['CELERY_BROKER_URL'].rsplit('/', 1)[1]}"
        in (worker.log_text())
    )
    client_redis = redis.Redis.from_url(redis_server.url)
    assert not [key for key in client_redis.keys("*") if b"kombu" in key or key == b"sandbox"]
    client_redis.close()
