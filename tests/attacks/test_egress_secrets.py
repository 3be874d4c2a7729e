"""Attack review: secret values reaching handler code that only ever held references.

README ("How secrets reach their hosts"): "Handler code holds references, not values";
"code that never held a value cannot leak it" (tools_app/secret_refs.py). Responses are
masked only for the secrets *that request carried* (egress._Session.response uses
``outgoing.carried``), so a handler stores the value at an allowed host in one request
and reads it back in a second request that carries no reference: the second answer
holds the raw value, which the handler can then respell past every scrubber.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from tests.fakes.egress_server import EgressTestServer, RecordedRequest, respond
from tests.tools_app.test_egress import WEATHER, WEATHER_DNS, FakeResolver, local, weather
from tools_app.egress import EgressFailed, EgressPolicy, FetchRequest, fetch
from tools_app.secret_refs import SecretBinding, make_reference


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


@pytest.mark.xfail(
    strict=True,
    reason="ATTACK FINDING: a response is masked only for secrets its own request carried "
    "(tools_app/egress.py _Session.response); a second request reads the stored value raw",
)
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


@pytest.mark.xfail(
    strict=True,
    reason="ATTACK FINDING: the proxy scans a request body once per workspace secret with a "
    "regex, synchronously on the parent's event loop (egress._with_secrets -> carries_value); "
    "a handler's large bodies cost the parent (the web process when embedded) seconds of CPU "
    "that no sandbox limit counts and no timeout interrupts",
)
async def test_a_large_body_costs_the_parent_little_cpu_whatever_the_secrets() -> None:
    secrets = [
        SecretBinding(f"FILL{i}", f"fill-value-{i}-abcdefgh", ("api.example.test",),
                      make_reference(f"FILL{i}"))
        for i in range(20)
    ]  # fmt: skip
    body = "x" * (8 * 1024 * 1024)  # a handler makes this in a few ms (heap: 64 MB)
    policy = EgressPolicy(timeout_s=1.0)
    started = time.process_time()
    with pytest.raises(EgressFailed):  # nowhere to go: all the cost is before DNS
        await fetch(
            FetchRequest("http://nowhere.invalid/", method="POST", body=body),
            policy=policy,
            secrets=secrets,
            resolver=FakeResolver({}),
        )
    cpu_s = time.process_time() - started
    # One of a handler's 50 fetches; a sandboxed call's whole CPU budget is 2 s.
    assert cpu_s < 0.5, f"one fetch cost the parent {cpu_s:.1f} s of CPU"
