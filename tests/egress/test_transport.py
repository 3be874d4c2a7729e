"""The guarded httpx transport (what the MCP SDK dials through), on its own: one origin,
the name resolved once and pinned, secret references expanded only for their hosts,
responses capped, and the guard's one sentence under a public-only policy."""

from __future__ import annotations

import httpx
import pytest

import egress
from egress.secret_refs import SecretBinding
from egress.transport import GuardedTransport, GuardRefused
from tests.fakes.egress_server import EgressTestServer, redirect, respond, stream

OPEN = egress.Policy(allow_private=True, ports=None)
TOKEN = SecretBinding("TOKEN", "tok-9f8e7d6c5b", ("api.example.test",), "secret_ref_TOKEN_x1")


def _answers(address: str, asked: list[str]) -> egress.guard.Lookup:
    async def lookup(host: str, port: int) -> list[str]:
        asked.append(host)
        return [address]

    return lookup


async def test_requests_go_to_the_pinned_address_with_the_original_host() -> None:
    asked: list[str] = []
    async with EgressTestServer() as server:
        server.route("/a", respond(200, b"one"))
        server.route("/b", respond(200, b"two"))
        transport = GuardedTransport(
            server.url("/", host="api.example.test"), OPEN, resolver=_answers("127.0.0.1", asked)
        )
        async with httpx.AsyncClient(transport=transport) as client:
            first = await client.get(server.url("/a", host="api.example.test"))
            second = await client.get(server.url("/b", host="api.example.test"))
    assert (first.content, second.content) == (b"one", b"two")
    assert asked == ["api.example.test"]  # resolved once for the transport's life
    assert server.requests[-1].headers["host"] == f"api.example.test:{server.port}"


async def test_another_host_is_refused_before_any_lookup() -> None:
    asked: list[str] = []
    async with EgressTestServer() as server:
        server.route("/moved", redirect(server.url("/x", host="other.example.test")))
        transport = GuardedTransport(
            server.url("/", host="api.example.test"), OPEN, resolver=_answers("127.0.0.1", asked)
        )
        async with httpx.AsyncClient(transport=transport, follow_redirects=True) as client:
            with pytest.raises(GuardRefused, match=r"only api\.example\.test"):
                await client.get(server.url("/moved", host="api.example.test"))
    assert asked == ["api.example.test"] and len(server.requests) == 1
    assert transport.failed.is_set()


async def test_a_secret_reference_becomes_its_value_only_for_its_hosts() -> None:
    async with EgressTestServer() as server:
        server.route("/", respond(200, b"ok"))
        headers = {"Authorization": f"Bearer {TOKEN.reference}"}
        for host, allowed in (("api.example.test", True), ("evil.example.test", False)):
            transport = GuardedTransport(
                server.url("/", host=host), OPEN, secrets=[TOKEN],
                resolver=_answers("127.0.0.1", []),
            )  # fmt: skip
            async with httpx.AsyncClient(transport=transport, headers=headers) as client:
                if allowed:
                    await client.get(server.url("/", host=host))
                else:
                    with pytest.raises(GuardRefused, match="may not be sent to evil"):
                        await client.get(server.url("/", host=host))
    (sent,) = server.requests
    assert sent.headers["authorization"] == f"Bearer {TOKEN.value}"


async def test_a_response_past_the_cap_breaks_off() -> None:
    async with EgressTestServer() as server:
        server.route("/big", stream(200_000))
        transport = GuardedTransport(server.url("/"), OPEN, max_response_bytes=64 * 1024)
        async with httpx.AsyncClient(transport=transport) as client:
            with pytest.raises(GuardRefused, match="larger than 65536 bytes"):
                await client.get(server.url("/big"))


async def test_under_a_public_only_policy_loopback_says_the_one_sentence() -> None:
    with pytest.raises(egress.EgressRefused, match="not a public address"):
        GuardedTransport("http://127.0.0.1:8080/mcp", egress.Policy())
    transport = GuardedTransport(
        "https://api.example.test/mcp", egress.Policy(), resolver=_answers("10.0.0.7", [])
    )
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(GuardRefused, match=r"api\.example\.test:443 is not a public address"):
            await client.get("https://api.example.test/mcp")
