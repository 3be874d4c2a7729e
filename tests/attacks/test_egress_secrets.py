"""Attacks found by a review, now regressions: secret values reaching handler code that
only ever held references, and the proxy's own cost.

- A handler stores a value at an allowed host in one request and reads it back in a
  second request that carries no reference: every response is masked for every secret
  of the workspace, not only for the ones its request carried.
- A handler's large request bodies once cost the parent seconds of CPU per secret
  (a regex scan per secret): one Aho-Corasick pass now, and bodies are capped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from egress.client import EgressDenied, EgressPolicy, FetchRequest, fetch
from egress.secret_refs import SecretBinding, make_reference
from tests.fakes.egress_server import EgressTestServer, RecordedRequest, respond
from tests.tools_app.test_egress import WEATHER, WEATHER_DNS, FakeResolver, local, weather


@pytest.fixture
async def server() -> AsyncIterator[EgressTestServer]:
    async with EgressTestServer() as running:
        yield running


def _store_and_load(server: EgressTestServer) -> None:
    """An allowed host with write-then-read semantics (a CRM note, a ticket, a KV store)."""
    stored: list[bytes] = []

    async def store(request: RecordedRequest, writer: asyncio.StreamWriter, _: object) -> None:
        stored.append(request.body)
        await respond(201, b"saved")(request, writer, server)

    async def load(request: RecordedRequest, writer: asyncio.StreamWriter, _: object) -> None:
        await respond(200, stored[-1])(request, writer, server)

    server.route("/notes/new", store)
    server.route("/notes/last", load)


async def test_a_value_stored_then_read_back_reaches_the_handler_as_a_reference(
    server: EgressTestServer,
) -> None:
    _store_and_load(server)
    resolver = FakeResolver(WEATHER_DNS)
    write = FetchRequest(
        weather(server, "/notes/new"), method="POST", body=f"note: {WEATHER.reference}"
    )
    await fetch(write, policy=local(server), secrets=[WEATHER], resolver=resolver)
    assert server.requests[0].body == f"note: {WEATHER.value}".encode()  # expanded, as promised

    read = await fetch(
        FetchRequest(weather(server, "/notes/last")),
        policy=local(server),
        secrets=[WEATHER],
        resolver=resolver,
    )
    # The handler (browser-sent code, or a member's) must never see the value itself.
    assert WEATHER.value.encode() not in read.body


async def test_a_large_body_costs_the_parent_little_cpu_whatever_the_secrets() -> None:
    secrets = [
        SecretBinding(f"FILL{i}", f"fill-value-{i}-abcdefgh", ("api.example.test",),
                      make_reference(f"FILL{i}"))
        for i in range(20)
    ]  # fmt: skip
    body = "x" * (8 * 1024 * 1024)  # a handler makes this in a few ms (heap: 64 MB)
    policy = EgressPolicy(timeout_s=1.0)
    started = time.process_time()
    with pytest.raises(EgressDenied):  # nowhere to go: all the cost is before DNS
        await fetch(
            FetchRequest("http://nowhere.invalid/", method="POST", body=body),
            policy=policy,
            secrets=secrets,
            resolver=FakeResolver({}),
        )
    cpu_s = time.process_time() - started
    # One of a handler's 50 fetches; a sandboxed call's whole CPU budget is 2 s.
    assert cpu_s < 0.5, f"one fetch cost the parent {cpu_s:.1f} s of CPU"
